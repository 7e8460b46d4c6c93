package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// noClientCaps is the gateway's one refusal of a 2026-07-28 request whose
// _meta lacks the client capabilities, a required field (-32602, HTTP 400).
const noClientCaps = "Invalid params: missing required _meta field io.modelcontextprotocol/clientCapabilities"

// badClientCaps is its refusal of client capabilities that are there but
// not shaped as the schema types them (-32602, HTTP 400): the member, what
// it should be and what it is.
func badClientCaps(member, got string) string {
	return "Invalid params: invalid _meta field io.modelcontextprotocol/clientCapabilities" + member + ": expected an object, got " + got
}

// TestV2026MissingClientCapabilities sends every request the gateway
// answers itself on the 2026-07-28 wire without
// io.modelcontextprotocol/clientCapabilities in its _meta, and with ones
// that are malformed (not an object, or extensions or the tasks extension's
// settings not one), through the real Caddy: each gets -32602 and the
// message of its case ("missing" or "invalid"), a call of a tool that runs
// only as a task too (it never reaches the upstream), and the task named
// is left as it was. A call of another tool, which could not become a task
// without the extension declared, is the upstream's to judge: it passes
// through.
func TestV2026MissingClientCapabilities(t *testing.T) {
	t.Parallel()
	_, rec, upAddr := recordedUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: upAddr, Directives: "task_after 200ms\ntool failing_job required\ntool slow_compute optional"})
	mc := newV2026Client(t, gw.URL, true)
	created := mc.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 3600, "label": "caps"}}) // cancelled at the end; the subtests may wait long for a turn in a busy run
	id := str(created["taskId"])
	if str(created["resultType"]) != "task" || id == "" {
		t.Fatalf("the call answered %v, want a task", created)
	}
	calls := rec.count("tools/call")

	// post sends a 2026-07-28 request whose _meta has its version and the
	// client capabilities caps (none when nil).
	post := func(t *testing.T, method, name string, params map[string]any, caps json.RawMessage) (int, *jsonrpc.Message) {
		t.Helper()
		meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
		if caps != nil {
			meta["io.modelcontextprotocol/clientCapabilities"] = caps
		}
		params["_meta"] = meta
		body, err := jsonrpc.RequestBytes(json.RawMessage("1"), method, params)
		if err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		var m jsonrpc.Message
		if err := json.Unmarshal(data, &m); err != nil || m.Error == nil {
			t.Fatalf("%s: HTTP %d %s, want a JSON-RPC error", method, resp.StatusCode, data)
		}
		return resp.StatusCode, &m
	}

	methods := []struct {
		method, name string
		params       func() map[string]any
	}{
		{"tasks/get", id, func() map[string]any { return map[string]any{"taskId": id} }},
		{"tasks/update", id, func() map[string]any { return map[string]any{"taskId": id, "inputResponses": map[string]any{}} }},
		{"tasks/cancel", id, func() map[string]any { return map[string]any{"taskId": id} }},
		{"subscriptions/listen", "", func() map[string]any { return map[string]any{"notifications": map[string]any{"taskIds": []string{id}}} }},
		{"tools/call", "failing_job", func() map[string]any { return map[string]any{"name": "failing_job", "arguments": map[string]any{}} }},
	}
	const tasksSettings = `.extensions["io.modelcontextprotocol/tasks"]`
	for _, c := range []struct {
		name string
		caps json.RawMessage
		want string
	}{
		{"absent", nil, noClientCaps},
		{"a string", json.RawMessage(`"tasks"`), badClientCaps("", "a string")},
		{"a number", json.RawMessage(`1`), badClientCaps("", "a number")},
		{"an array", json.RawMessage(`[]`), badClientCaps("", "an array")},
		{"null", json.RawMessage(`null`), badClientCaps("", "null")},
		{"extensions a string", json.RawMessage(`{"extensions":"x"}`), badClientCaps(".extensions", "a string")},
		{"tasks settings a number", json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":5}}`), badClientCaps(tasksSettings, "a number")},
	} {
		for _, tt := range methods {
			t.Run(c.name+"/"+tt.method, func(t *testing.T) {
				t.Parallel()
				status, m := post(t, tt.method, tt.name, tt.params(), c.caps)
				if status != http.StatusBadRequest || m.Error.Code != jsonrpc.CodeInvalidParams || m.Error.Message != c.want {
					t.Errorf("HTTP %d %d %q, want 400 %d %q", status, m.Error.Code, m.Error.Message, jsonrpc.CodeInvalidParams, c.want)
				}
			})
		}
	}
	t.Run("tools/call of a tool that may run without a task", func(t *testing.T) {
		t.Parallel()
		if _, m := post(t, "tools/call", "slow_compute", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1}}, nil); m.Error.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("the upstream's answer: %d %q, want its -32602", m.Error.Code, m.Error.Message)
		}
	})
	t.Cleanup(func() {
		// Only the call of the tool that may run without a task reached
		// the upstream; the task is untouched (the cancel was refused).
		if n := rec.count("tools/call") - calls; n != 1 {
			t.Errorf("the upstream got %d tools/call after the task's, want 1 (the call the gateway does not answer itself)", n)
		}
		if got := mc.get(id); str(got["status"]) != "working" {
			t.Errorf("the task after the refused requests: %v, want it working", got)
		}
		mc.ok("tasks/cancel", map[string]any{"taskId": id})
	})
}
