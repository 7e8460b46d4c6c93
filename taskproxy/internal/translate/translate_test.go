package translate

import (
	"encoding/json"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

func TestBridgeTranslateResult(t *testing.T) {
	t.Parallel()
	info := json.RawMessage(`{"name":"up","version":"1"}`)
	tests := []struct {
		name, method, in string
		info             json.RawMessage
		want             string
	}{
		{"call gets resultType", "tools/call", `{"content":[]}`, nil, `{"content":[],"resultType":"complete"}`},
		{"resultType kept", "tools/call", `{"resultType":"complete","content":[]}`, nil, `{"resultType":"complete","content":[]}`},
		{"empty result", "ping", ``, nil, `{"resultType":"complete"}`},
		{"list is cacheable, tools lose execution", "tools/list",
			`{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b"}]}`, nil,
			`{"tools":[{"name":"a"},{"name":"b"}],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{"read is cacheable", "resources/read", `{"contents":[]}`, nil, `{"contents":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`},
		{"server info", "prompts/get", `{"messages":[]}`, info, `{"messages":[],"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Result(tt.method, json.RawMessage(tt.in), tt.info)
			if !jsonEqual(t, got, tt.want) {
				t.Errorf("Result = %s, want %s", got, tt.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

func TestBridgeV2025Params(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"protocol fields go, progress token stays",
			`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}`,
			`{"name":"x","_meta":{"progressToken":7}}`},
		{"only protocol fields: _meta goes",
			`{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, `{"name":"x"}`},
		{"multi-round-trip members go",
			`{"name":"x","inputResponses":{"a":{}},"requestState":"s"}`, `{"name":"x"}`},
		{"a client's params.task goes (ignored in 2026-07-28, a task request in 2025-11-25)",
			`{"name":"x","arguments":{"task":1},"task":{"ttl":60000}}`, `{"name":"x","arguments":{"task":1}}`},
		{"no params", ``, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := V2025Params(json.RawMessage(tt.in)); !jsonEqual(t, got, tt.want) {
				t.Errorf("V2025Params = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBridgeTranslateError(t *testing.T) {
	t.Parallel()
	if e := Error(jsonrpc.Errorf(-32002, "Resource not found")); e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("-32002 became %d, want -32602", e.Code)
	}
	if e := Error(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "x")); e.Code != jsonrpc.CodeMethodNotFound {
		t.Errorf("-32601 became %d", e.Code)
	}
}
