package taskproxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

const declaring = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
const plainCaps = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func TestDetectEra(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, body string
		want               task.Era
	}{
		{"initialize", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`, task.Era2025},
		{"2025-11-25 header", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, task.Era2025},
		{"2026-07-28 header", "2026-07-28", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, task.Era2026},
		{"future header", "2027-01-01", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, task.Era2026},
		{"2026-07-28 meta only", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + plainCaps + `}}`, task.Era2026},
		{"meta key with escapes", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`, task.Era2026},
		{"meta with an escaped name", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_m\u0065ta":{"io.modelcontextprotocol/\u0070rotocolVersion":"2026-07-28"}}}`, task.Era2026},
		{"meta key elsewhere", "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"io.modelcontextprotocol/protocolVersion":"x"}}}`, task.Era2025},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := jsonrpc.Parse([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			r := post(tt.body)
			if tt.header != "" {
				r.Header.Set("MCP-Protocol-Version", tt.header)
			}
			if got := detectEra(r, m); got != tt.want {
				t.Errorf("detectEra = %s, want %s", got, tt.want)
			}
		})
	}
}

// Every error code the gateway answers on the 2026-07-28 wire, with its HTTP
// status, for requests it handles itself.
func TestV2026Validation(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{Tools: map[string]task.Support{"job": task.SupportRequired}})
	hdr := func(method, name string) []string {
		h := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method}
		if name != "" {
			h = append(h, "Mcp-Name", name)
		}
		return h
	}
	// The one refusal of a request without client capabilities, whichever
	// method the gateway answers.
	const noCaps = "Invalid params: missing required _meta field io.modelcontextprotocol/clientCapabilities"
	tests := []struct {
		name    string
		body    string
		headers []string
		status  int
		code    int
		inMsg   string
	}{
		{"tasks/get unknown id", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"nope",` + declaring + `}}`,
			hdr("tasks/get", "nope"), 400, jsonrpc.CodeInvalidParams, "not found"},
		{"tasks/get without the extension", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"nope",` + plainCaps + `}}`,
			hdr("tasks/get", "nope"), 400, jsonrpc.CodeMissingRequiredClientCapability, "Missing required client capability"},
		{"Mcp-Name mismatch", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a",` + declaring + `}}`,
			hdr("tasks/get", "b"), 400, jsonrpc.CodeHeaderMismatch, "Mcp-Name"},
		{"Mcp-Name base64", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"a",` + declaring + `}}`,
			hdr("tasks/cancel", "=?base64?YQ==?="), 400, jsonrpc.CodeInvalidParams, "not found"},
		{"Mcp-Name missing: taken from taskId", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a",` + declaring + `}}`,
			hdr("tasks/get", ""), 400, jsonrpc.CodeInvalidParams, "not found"},
		{"Mcp-Name missing on tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job",` + declaring + `}}`,
			hdr("tools/call", ""), 400, jsonrpc.CodeHeaderMismatch, "missing"},
		{"Mcp-Method mismatch", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a",` + declaring + `}}`,
			hdr("tools/call", "a"), 400, jsonrpc.CodeHeaderMismatch, "Mcp-Method"},
		{"version header mismatch", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a",` + declaring + `}}`,
			[]string{"MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tasks/get", "Mcp-Name", "a"}, 400, jsonrpc.CodeHeaderMismatch, "MCP-Protocol-Version"},
		{"unsupported version", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			[]string{"MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "tasks/get", "Mcp-Name", "a"}, 400, jsonrpc.CodeUnsupportedProtocolVersion, "Unsupported"},
		{"missing _meta", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a"}}`,
			hdr("tasks/get", "a"), 400, jsonrpc.CodeInvalidParams, "_meta"},
		{"missing capabilities", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			hdr("tasks/get", "a"), 400, jsonrpc.CodeInvalidParams, noCaps},
		{"tasks/update missing capabilities", `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"a","inputResponses":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			hdr("tasks/update", "a"), 400, jsonrpc.CodeInvalidParams, noCaps},
		{"tasks/cancel missing capabilities", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			hdr("tasks/cancel", "a"), 400, jsonrpc.CodeInvalidParams, noCaps},
		{"listen taskIds missing capabilities", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			hdr("subscriptions/listen", ""), 400, jsonrpc.CodeInvalidParams, noCaps},
		{"tasks/result removed", `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"a",` + declaring + `}}`,
			hdr("tasks/result", ""), 404, jsonrpc.CodeMethodNotFound, "not part"},
		{"tasks/list removed", `{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{` + declaring + `}}`,
			hdr("tasks/list", ""), 404, jsonrpc.CodeMethodNotFound, "not part"},
		{"required tool without capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			hdr("tools/call", "job"), 400, jsonrpc.CodeInvalidParams, noCaps},
		{"required tool without _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job"}}`,
			hdr("tools/call", "job"), 400, jsonrpc.CodeInvalidParams, "_meta"},
		{"required tool without the extension", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job",` + plainCaps + `}}`,
			hdr("tools/call", "job"), 400, jsonrpc.CodeMissingRequiredClientCapability, "job"},
		{"tools/call with wrong Mcp-Method", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow",` + declaring + `}}`,
			hdr("tasks/get", "slow"), 400, jsonrpc.CodeHeaderMismatch, "Mcp-Method"},
		{"listen taskIds without the extension", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["a"]},` + plainCaps + `}}`,
			hdr("subscriptions/listen", ""), 400, jsonrpc.CodeMissingRequiredClientCapability, "subscriptions/listen"},
		{"tasks/update without inputResponses", `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"a",` + declaring + `}}`,
			hdr("tasks/update", "a"), 400, jsonrpc.CodeInvalidParams, "inputResponses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			called := false
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(tt.body, tt.headers...), next); err != nil {
				t.Fatal(err)
			}
			if called {
				t.Fatal("the upstream was called")
			}
			var m jsonrpc.Message
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Error == nil {
				t.Fatalf("body %s is not a JSON-RPC error", rec.Body)
			}
			if rec.Code != tt.status || m.Error.Code != tt.code || !strings.Contains(m.Error.Message, tt.inMsg) {
				t.Errorf("HTTP %d %d %q, want %d %d containing %q", rec.Code, m.Error.Code, m.Error.Message, tt.status, tt.code, tt.inMsg)
			}
			if tt.code == jsonrpc.CodeMissingRequiredClientCapability && !strings.Contains(string(m.Error.Data), `"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`) {
				t.Errorf("-32021 without data.requiredCapabilities: %s", m.Error.Data)
			}
			if tt.code == jsonrpc.CodeUnsupportedProtocolVersion && !strings.Contains(string(m.Error.Data), `"requested":"2099-01-01"`) {
				t.Errorf("-32022 data = %s", m.Error.Data)
			}
		})
	}
}
