package taskproxy

import (
	"encoding/json"
	"io"
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
		{"_meta null", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","_meta":null}}`,
			hdr("tasks/get", "a"), 400, jsonrpc.CodeInvalidParams, "Invalid params: invalid params._meta: expected an object, got null"},
		{"_meta a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","_meta":"x"}}`,
			hdr("tools/call", "job"), 400, jsonrpc.CodeInvalidParams, "Invalid params: invalid params._meta: expected an object, got a string"},
		{"version null", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","_meta":{"io.modelcontextprotocol/protocolVersion":null,"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			hdr("tasks/get", "a"), 400, jsonrpc.CodeInvalidParams, "Invalid params: invalid _meta field io.modelcontextprotocol/protocolVersion: expected a string, got null"},
		{"version a number", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"a","_meta":{"io.modelcontextprotocol/protocolVersion":20260728,"io.modelcontextprotocol/clientCapabilities":{}}}}`,
			hdr("tasks/cancel", "a"), 400, jsonrpc.CodeInvalidParams, "Invalid params: invalid _meta field io.modelcontextprotocol/protocolVersion: expected a string, got a number"},
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

// TestV2026MalformedClientCapabilities sends every request the gateway
// answers itself on the 2026-07-28 wire with client capabilities that are
// absent, present but not an object, or shaped against the schema where the
// gateway reads them (extensions and the tasks extension's settings are
// objects): an absent field is "missing", a present one of the wrong type
// "invalid", naming the member and the object it should be, both -32602
// with HTTP 400 and neither reaching the upstream. Well-typed capabilities
// without the tasks extension get the -32021 instead, and an unknown
// extension's settings are not the gateway's to judge.
func TestV2026MalformedClientCapabilities(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{Tools: map[string]task.Support{"job": task.SupportRequired}})
	const capsField = "io.modelcontextprotocol/clientCapabilities"
	methods := []struct {
		method, name, params string
	}{
		{"tools/call", "job", `"name":"job","arguments":{}`},
		{"tasks/get", "a", `"taskId":"a"`},
		{"tasks/update", "a", `"taskId":"a","inputResponses":{}`},
		{"tasks/cancel", "a", `"taskId":"a"`},
		{"subscriptions/listen", "", `"notifications":{"taskIds":["a"]}`},
	}
	invalid := func(path, got string) string {
		return "Invalid params: invalid _meta field " + capsField + path + ": expected an object, got " + got
	}
	tests := []struct {
		name string
		caps string // the _meta member's value; empty: absent
		code int
		msg  string // the whole message; empty: any
	}{
		{"absent", "", jsonrpc.CodeInvalidParams, "Invalid params: missing required _meta field " + capsField},
		{"a string", `"tasks"`, jsonrpc.CodeInvalidParams, invalid("", "a string")},
		{"a number", `0`, jsonrpc.CodeInvalidParams, invalid("", "a number")},
		{"an array", `[{"extensions":{"io.modelcontextprotocol/tasks":{}}}]`, jsonrpc.CodeInvalidParams, invalid("", "an array")},
		{"null", `null`, jsonrpc.CodeInvalidParams, invalid("", "null")},
		{"a boolean", `true`, jsonrpc.CodeInvalidParams, invalid("", "a boolean")},
		{"extensions a string", `{"extensions":"x"}`, jsonrpc.CodeInvalidParams, invalid(".extensions", "a string")},
		{"extensions null", `{"extensions":null}`, jsonrpc.CodeInvalidParams, invalid(".extensions", "null")},
		{"tasks settings a number", `{"extensions":{"io.modelcontextprotocol/tasks":5}}`, jsonrpc.CodeInvalidParams,
			invalid(`.extensions["io.modelcontextprotocol/tasks"]`, "a number")},
		{"tasks settings true", `{"extensions":{"io.modelcontextprotocol/tasks":true}}`, jsonrpc.CodeInvalidParams,
			invalid(`.extensions["io.modelcontextprotocol/tasks"]`, "a boolean")},
		{"no extensions", `{}`, jsonrpc.CodeMissingRequiredClientCapability, ""},
		{"other extensions only", `{"extensions":{"com.example/other":{}}}`, jsonrpc.CodeMissingRequiredClientCapability, ""},
		{"another extension's settings malformed", `{"extensions":{"com.example/other":5}}`, jsonrpc.CodeMissingRequiredClientCapability, ""},
	}
	for _, m := range methods {
		for _, tt := range tests {
			t.Run(m.method+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
				if tt.caps != "" {
					meta += `,"` + capsField + `":` + tt.caps
				}
				body := `{"jsonrpc":"2.0","id":1,"method":"` + m.method + `","params":{` + m.params + `,"_meta":{` + meta + `}}}`
				h := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", m.method}
				if m.name != "" {
					h = append(h, "Mcp-Name", m.name)
				}
				called := false
				next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
				rec := httptest.NewRecorder()
				if err := g.ServeHTTP(rec, post(body, h...), next); err != nil {
					t.Fatal(err)
				}
				if called {
					t.Fatal("the upstream was called")
				}
				var got jsonrpc.Message
				if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Error == nil {
					t.Fatalf("body %s is not a JSON-RPC error", rec.Body)
				}
				if rec.Code != http.StatusBadRequest || got.Error.Code != tt.code || tt.msg != "" && got.Error.Message != tt.msg {
					t.Errorf("HTTP %d %d %q, want 400 %d %q", rec.Code, got.Error.Code, got.Error.Message, tt.code, tt.msg)
				}
			})
		}
	}
}

// TestV2026MalformedCapabilitiesPassOn: a call of a tool that may run
// without a task, with malformed client capabilities, is the upstream's to
// judge: it passes on, and a tasks extension entry that is not an object
// is taken out first, so that an upstream that runs tasks itself cannot
// take it for a declaration the gateway did not accept. Well-typed
// capabilities that declare the extension still make the call the
// gateway's.
func TestV2026MalformedCapabilitiesPassOn(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{Tools: map[string]task.Support{"job": task.SupportOptional}})
	tests := []struct {
		name, caps, wantCaps string
	}{
		{"tasks settings a number", `{"extensions":{"io.modelcontextprotocol/tasks":5,"com.example/other":{}}}`, `{"extensions":{"com.example/other":{}}}`},
		{"extensions a string", `{"extensions":"x"}`, `{"extensions":"x"}`},
		{"null", `null`, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + tt.caps + `}}}`
			var seen []byte
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen, _ = io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"the upstream's"}}`)
			})
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "job"), next); err != nil {
				t.Fatal(err)
			}
			if seen == nil {
				t.Fatalf("the upstream was not called; the gateway answered HTTP %d %s", rec.Code, rec.Body)
			}
			var m struct {
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			if err := json.Unmarshal(seen, &m); err != nil {
				t.Fatalf("the upstream got %s: %v", seen, err)
			}
			if got := string(m.Params.Meta["io.modelcontextprotocol/clientCapabilities"]); got != tt.wantCaps {
				t.Errorf("the upstream got client capabilities %s, want %s", got, tt.wantCaps)
			}
			if !strings.Contains(rec.Body.String(), "the upstream's") {
				t.Errorf("the client got HTTP %d %s, want the upstream's answer", rec.Code, rec.Body)
			}
		})
	}
}
