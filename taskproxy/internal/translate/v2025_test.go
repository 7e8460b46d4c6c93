package translate

import (
	"encoding/json"
	"testing"
)

func TestV2025Result(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"call result", `{"resultType":"complete","content":[{"type":"text","text":"x"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`,
			`{"content":[{"type":"text","text":"x"}]}`},
		{"list result", `{"resultType":"complete","tools":[{"name":"a"}],"ttlMs":60000,"cacheScope":"public","nextCursor":"c"}`,
			`{"tools":[{"name":"a"}],"nextCursor":"c"}`},
		{"other meta stays", `{"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{},"x":1}}`, `{"_meta":{"x":1}}`},
		{"isError stays", `{"resultType":"complete","content":[],"isError":true}`, `{"content":[],"isError":true}`},
		{"empty", ``, `{}`},
		{"not an object", `[1]`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := V2025Result(json.RawMessage(tt.in)); !jsonEqual(t, got, tt.want) {
				t.Errorf("V2025Result = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestV2026ClientCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"tasks go, the rest stays", `{"elicitation":{"form":{}},"tasks":{"requests":{}},"roots":{}}`, `{"elicitation":{"form":{}},"roots":{}}`},
		{"none", ``, `{}`},
		{"not an object", `null`, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := V2026ClientCapabilities(json.RawMessage(tt.in)); !jsonEqual(t, got, tt.want) {
				t.Errorf("V2026ClientCapabilities = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestV2026Params(t *testing.T) {
	t.Parallel()
	info := json.RawMessage(`{"name":"c","version":"1"}`)
	tests := []struct {
		name, in string
		meta     RequestMeta
		want     string
	}{
		{"fields set, progress token kept", `{"name":"echo","_meta":{"progressToken":3}}`, RequestMeta{Capabilities: json.RawMessage(`{"elicitation":{}}`), ClientInfo: info},
			`{"name":"echo","_meta":{"progressToken":3,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}`},
		{"no params, no capabilities", ``, RequestMeta{},
			`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`},
		{"task augmentation goes, log level set", `{"name":"x","task":{"ttl":1000}}`, RequestMeta{LogLevel: "info"},
			`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"info"}}`},
		{"a client's own protocol fields are replaced", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"1999-01-01"}}`, RequestMeta{},
			`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := V2026Params(json.RawMessage(tt.in), tt.meta)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, tt.want) {
				t.Errorf("V2026Params = %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := V2026Params(json.RawMessage(`[1]`), RequestMeta{}); err == nil {
		t.Error("V2026Params of an array: no error")
	}
}

func TestV2025Initialize(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"the fixture's discover",
			`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"instructions":"hi","ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"rt","version":"2"}}}`,
			`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"rt","version":"2"},"instructions":"hi"}`},
		{"bare", `{}`, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"mcp-tasks-gateway","version":"0"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := V2025Initialize(json.RawMessage(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, tt.want) {
				t.Errorf("V2025Initialize = %s, want %s", got, tt.want)
			}
		})
	}
}
