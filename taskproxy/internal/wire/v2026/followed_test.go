package v2026

import (
	"encoding/json"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
)

func TestWithTasksExtension(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, params string }{
		{"no _meta", `{"name":"steps"}`},
		{"capabilities without extensions", `{"name":"steps","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}`},
		{"other extension", `{"name":"steps","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.example/x":{}}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := withTasksExtension(json.RawMessage(tt.params))
			if err != nil {
				t.Fatal(err)
			}
			meta := RequestMeta{Capabilities: mustGet(t, mustGet(t, got, "_meta"), wire.MetaClientCapabilities)}
			if !meta.DeclaresTasks() {
				t.Errorf("withTasksExtension(%s) = %s, which declares no tasks extension", tt.params, got)
			}
			back, err := withoutTasksExtension(got)
			if err != nil {
				t.Fatal(err)
			}
			m := RequestMeta{Capabilities: mustGet(t, mustGet(t, back, "_meta"), wire.MetaClientCapabilities)}
			if m.DeclaresTasks() {
				t.Errorf("withoutTasksExtension left the extension: %s", back)
			}
		})
	}
}

func mustGet(t *testing.T, b json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m[key] == nil {
		t.Fatalf("%s has no %q", b, key)
	}
	return m[key]
}
