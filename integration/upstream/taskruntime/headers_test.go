package taskruntime

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRequestValidation covers every rejection before dispatch, and the
// header forms that are accepted.
//
//nolint:paralleltest,tparallel // the test counts, after its cases, what the server refused
func TestRequestValidation(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	c := newClient(t, url, true)
	taskID := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	b64 := func(v string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?=" }
	type edit = func(h http.Header, body map[string]any)
	params := func(body map[string]any) map[string]any { return body["params"].(map[string]any) }
	meta := func(body map[string]any) map[string]any { return params(body)["_meta"].(map[string]any) }
	tests := []struct {
		name       string
		method     string
		params     map[string]any
		edit       edit
		wantStatus int
		wantCode   int // 0: a result
		wantMsg    string
	}{
		{"discover", "server/discover", nil, nil, 200, 0, ""},
		{"no protocol version header", "server/discover", nil, func(h http.Header, _ map[string]any) { h.Del(headerProtocolVersion) }, 400, CodeHeaderMismatch, "MCP-Protocol-Version header is missing"},
		{"protocol version header twice", "server/discover", nil, func(h http.Header, _ map[string]any) { h.Add(headerProtocolVersion, ProtocolVersion) }, 400, CodeHeaderMismatch, "given 2 times"},
		{"2025-11-25 header", "tools/list", nil, func(h http.Header, _ map[string]any) { h.Set(headerProtocolVersion, "2025-11-25") }, 400, CodeUnsupportedVersion, "Unsupported protocol version"},
		{"body version differs from header", "tools/list", nil, func(_ http.Header, b map[string]any) { meta(b)[metaProtocolVersion] = "2025-06-18" }, 400, CodeHeaderMismatch, "does not match body value '2025-06-18'"},
		{"no _meta", "tools/list", nil, func(_ http.Header, b map[string]any) { delete(params(b), "_meta") }, 400, CodeInvalidParams, "protocolVersion"},
		{"no clientCapabilities", "tools/list", nil, func(_ http.Header, b map[string]any) { delete(meta(b), metaClientCapabilities) }, 400, CodeInvalidParams, "clientCapabilities"},
		{"no Mcp-Method", "tools/list", nil, func(h http.Header, _ map[string]any) { h.Del(headerMethod) }, 400, CodeHeaderMismatch, "Mcp-Method header is missing"},
		{"Mcp-Method differs", "tools/list", nil, func(h http.Header, _ map[string]any) { h.Set(headerMethod, "tools/call") }, 400, CodeHeaderMismatch, "Mcp-Method header value 'tools/call'"},
		{"tools/call without Mcp-Name", "tools/call", map[string]any{"name": ToolEcho}, func(h http.Header, _ map[string]any) { h.Del(headerName) }, 400, CodeHeaderMismatch, "Mcp-Name header is missing"},
		{"tools/call Mcp-Name differs", "tools/call", map[string]any{"name": ToolEcho}, func(h http.Header, _ map[string]any) { h.Set(headerName, ToolSteps) }, 400, CodeHeaderMismatch, "Mcp-Name header value 'steps' does not match body value 'echo'"},
		{"tools/call Mcp-Name twice", "tools/call", map[string]any{"name": ToolEcho}, func(h http.Header, _ map[string]any) { h.Add(headerName, ToolEcho) }, 400, CodeHeaderMismatch, "given 2 times"},
		{"tools/call Mcp-Name base64", "tools/call", map[string]any{"name": ToolEcho}, func(h http.Header, _ map[string]any) { h.Set(headerName, b64(ToolEcho)) }, 200, 0, ""},
		{"tools/call Mcp-Name bad base64", "tools/call", map[string]any{"name": ToolEcho}, func(h http.Header, _ map[string]any) { h.Set(headerName, "=?base64?***?=") }, 400, CodeHeaderMismatch, "not valid base64"},
		{"tools/call Mcp-Name non-ASCII", "tools/call", map[string]any{"name": ToolEcho}, func(h http.Header, _ map[string]any) { h.Set(headerName, "\xc3\xa9cho") }, 400, CodeHeaderMismatch, "invalid characters"},
		{"tools/call without params.name", "tools/call", map[string]any{}, nil, 400, CodeInvalidParams, "params.name is required"},
		{"tasks/get without Mcp-Name", "tasks/get", map[string]any{"taskId": taskID}, func(h http.Header, _ map[string]any) { h.Del(headerName) }, 400, CodeHeaderMismatch, "Mcp-Name header is missing"},
		{"tasks/get Mcp-Name differs", "tasks/get", map[string]any{"taskId": taskID}, func(h http.Header, _ map[string]any) { h.Set(headerName, "other") }, 400, CodeHeaderMismatch, "does not match body value '" + taskID + "'"},
		{"tasks/get Mcp-Name base64", "tasks/get", map[string]any{"taskId": taskID}, func(h http.Header, _ map[string]any) { h.Set(headerName, b64(taskID)) }, 200, 0, ""},
		{"tasks/update without Mcp-Name", "tasks/update", map[string]any{"taskId": taskID, "inputResponses": map[string]any{}}, func(h http.Header, _ map[string]any) { h.Del(headerName) }, 400, CodeHeaderMismatch, "Mcp-Name header is missing"},
		{"tasks/cancel without Mcp-Name", "tasks/cancel", map[string]any{"taskId": taskID}, func(h http.Header, _ map[string]any) { h.Del(headerName) }, 400, CodeHeaderMismatch, "Mcp-Name header is missing"},
		{"tasks/cancel Mcp-Name differs", "tasks/cancel", map[string]any{"taskId": taskID}, func(h http.Header, _ map[string]any) { h.Set(headerName, "x"+taskID) }, 400, CodeHeaderMismatch, "does not match"},
		{"tasks/result is gone", "tasks/result", map[string]any{"taskId": taskID}, nil, 404, CodeMethodNotFound, "tasks/result"},
		{"tasks/list is gone", "tasks/list", nil, nil, 404, CodeMethodNotFound, "tasks/list"},
		{"resources/read is not served", "resources/read", map[string]any{"uri": "file:///x"}, nil, 404, CodeMethodNotFound, "resources/read"},
		{"ping is not 2026", "ping", nil, nil, 404, CodeMethodNotFound, "ping"},
		{"Mcp-Session-Id is ignored", "tools/list", nil, func(h http.Header, _ map[string]any) { h.Set("Mcp-Session-Id", "abc") }, 200, 0, ""},
		{"foreign Origin", "tools/list", nil, func(h http.Header, _ map[string]any) { h.Set("Origin", "http://evil.example") }, 403, CodeInvalidRequest, "Origin"},
		{"null id", "tools/list", nil, func(_ http.Header, b map[string]any) { b["id"] = nil }, 400, CodeInvalidRequest, "id must be"},
		{"object id", "tools/list", nil, func(_ http.Header, b map[string]any) { b["id"] = map[string]any{} }, 400, CodeInvalidRequest, "id must be"},
		{"jsonrpc 1.0", "tools/list", nil, func(_ http.Header, b map[string]any) { b["jsonrpc"] = "1.0" }, 400, CodeInvalidRequest, "jsonrpc"},
		{"a response", "tools/list", nil, func(_ http.Header, b map[string]any) {
			delete(b, "method")
			delete(b, "params")
			b["result"] = map[string]any{}
		}, 400, CodeInvalidRequest, "responses"},
		{"initialize", "initialize", map[string]any{"protocolVersion": "2025-11-25"}, func(h http.Header, _ map[string]any) { h.Del(headerProtocolVersion) }, 400, CodeUnsupportedVersion, "Unsupported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, url, true)
			r := c.request(tt.method, tt.params, tt.edit)
			if r.status != tt.wantStatus {
				t.Errorf("HTTP status %d, want %d: %s", r.status, tt.wantStatus, r.body)
			}
			switch {
			case tt.wantCode == 0 && r.Error != nil:
				t.Errorf("error %s, want a result", r.body)
			case tt.wantCode != 0 && (r.Error == nil || r.Error.Code != tt.wantCode || !strings.Contains(r.Error.Message, tt.wantMsg)):
				t.Errorf("answer %s, want error %d containing %q", r.body, tt.wantCode, tt.wantMsg)
			case tt.wantCode != 0 && tt.wantStatus != 403 && len(r.ID) == 0 && tt.name != "null id" && tt.name != "object id" && tt.name != "a response" && tt.name != "jsonrpc 1.0":
				t.Errorf("error without the request's id: %s", r.body)
			}
			if r.header.Get("Mcp-Session-Id") != "" {
				t.Errorf("answer carries Mcp-Session-Id %q", r.header.Get("Mcp-Session-Id"))
			}
		})
	}
	if n := s.Rejections(CodeHeaderMismatch); n < 10 {
		t.Errorf("observer counted %d header mismatches, want every one", n)
	}
}

// TestErrorData checks the data the -32021 and -32022 errors carry.
func TestErrorData(t *testing.T) {
	t.Parallel()
	_, url := testRuntime(t, Options{})
	tests := []struct {
		name string
		send func(c *client) *reply
		want string
	}{
		{"unsupported version", func(c *client) *reply {
			return c.request("tools/list", nil, func(h http.Header, _ map[string]any) { h.Set(headerProtocolVersion, "1900-01-01") })
		}, `{"requested":"1900-01-01","supported":["2026-07-28"]}`},
		{"initialize", func(c *client) *reply {
			return c.request("initialize", map[string]any{"protocolVersion": "2025-11-25"}, nil)
		}, `{"requested":"2025-11-25","supported":["2026-07-28"]}`},
		{"required tool without the extension", func(c *client) *reply {
			c.caps = map[string]any{}
			return c.call(ToolSteps, nil)
		}, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`},
		{"input without elicitation", func(c *client) *reply {
			delete(c.caps, "elicitation")
			return c.call(ToolInterview, nil)
		}, `{"requiredCapabilities":{"elicitation":{}}}`},
		{"tasks/get without the extension", func(c *client) *reply {
			c.caps = map[string]any{}
			return c.get("anything")
		}, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.send(newClient(t, url, true))
			if r.status != http.StatusBadRequest || r.Error == nil {
				t.Fatalf("answer %d %s, want 400 with an error", r.status, r.body)
			}
			var got, want any
			if err := json.Unmarshal(r.Error.Data, &got); err != nil {
				t.Fatalf("error data %s: %v", r.Error.Data, err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatalf("want %s: %v", tt.want, err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("error data %s, want %s", g, w)
			}
		})
	}
}

// TestHTTPMethodsAndNotifications: only POST; notifications are 202 with
// no body.
func TestHTTPMethodsAndNotifications(t *testing.T) {
	t.Parallel()
	_, url := testRuntime(t, Options{})
	for _, m := range []string{http.MethodGet, http.MethodDelete, http.MethodPut} {
		req, _ := http.NewRequest(m, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != http.MethodPost {
			t.Errorf("%s: %d (Allow %q), want 405 (Allow POST)", m, resp.StatusCode, resp.Header.Get("Allow"))
		}
	}
	c := newClient(t, url, true)
	h := http.Header{"Content-Type": {"application/json"}}
	if r := c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`), h); r.status != http.StatusAccepted || len(r.body) != 0 {
		t.Errorf("notification: %d %q, want 202 and no body", r.status, r.body)
	}
	if r := c.post([]byte(`{"jsonrpc":`), h); r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != CodeParseError {
		t.Errorf("broken JSON: %d %s, want 400 -32700", r.status, r.body)
	}
	if r := c.post([]byte(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`), h); r.status != http.StatusBadRequest || r.Error == nil {
		t.Errorf("batch: %d %s, want 400", r.status, r.body)
	}
}
