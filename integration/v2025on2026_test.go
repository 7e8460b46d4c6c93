package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The reverse version bridge, end to end: 2025-11-25 clients (sessions,
// initialize) through the real ./caddy in front of the task runtime
// fixture, which speaks only 2026-07-28 and refuses a 2025-11-25
// initialize (HTTP 400, -32022). The gateway answers initialize itself from
// the fixture's server/discover, holds the session (bound to the caller's
// principal), and sends every other request on in 2026-07-28 form.

// reverseGateway starts the fixture and a gateway with JWT callers in
// front of it.
func reverseGateway(t *testing.T) (*taskruntime.Server, *gateway) {
	t.Helper()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	return rt, startGateway(t, gatewayOptions{Upstream: addr, Directives: hmacAuth})
}

// reverseClient is a raw 2025-11-25 client of principal sub.
func reverseClient(t *testing.T, gw *gateway, sub string) *rpcClient {
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+hmacToken(t, sub, "t1"))
	return c
}

// rawSessionRequest sends method (GET, DELETE) naming session as c's
// caller and returns the HTTP status.
func rawSessionRequest(t *testing.T, c *rpcClient, method, session string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, c.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", c.header.Get("Authorization"))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func textOf(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("error %d %s, want a result", m.Error.Code, m.Error.Message)
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: no text content", m.Result)
	}
	return r.Content[0].Text
}

// TestReverseBridgeSession: initialize, ping, tools/list, plain calls, a
// tool the fixture runs only as a task, progress, the session bound to its
// principal, GET 405 and DELETE, all as a raw 2025-11-25 client sees them.
func TestReverseBridgeSession(t *testing.T) {
	t.Parallel()
	rt, gw := reverseGateway(t)
	alice := reverseClient(t, gw, "alice")

	init := alice.initialize(`{"elicitation":{"form":{}},"tasks":{"requests":{}}}`)
	var ir struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      struct{ Name string }      `json:"serverInfo"`
		Instructions    string                     `json:"instructions"`
	}
	if err := json.Unmarshal(init.Result, &ir); err != nil {
		t.Fatal(err)
	}
	if ir.ProtocolVersion != "2025-11-25" || ir.ServerInfo.Name == "" || !strings.Contains(ir.Instructions, "task runtime fixture") {
		t.Errorf("initialize result %s: want 2025-11-25 with the fixture's server info and instructions", init.Result)
	}
	if _, ok := ir.Capabilities["tools"]; !ok {
		t.Errorf("initialize capabilities %s lack the fixture's tools", init.Result)
	}
	if _, ok := ir.Capabilities["extensions"]; ok {
		t.Errorf("initialize capabilities %s carry 2026-07-28 extensions", init.Result)
	}
	if !strings.HasPrefix(alice.session, "mcp-tasks-v2026.") {
		t.Fatalf("session id %q is not the gateway's", alice.session)
	}
	if n := rt.Rejections(taskruntime.CodeUnsupportedVersion); n != 0 {
		t.Errorf("the fixture refused %d requests with -32022, want none (the gateway answers initialize)", n)
	}

	if m := alice.call("ping", nil); m.Error != nil || string(m.Result) != "{}" {
		t.Errorf("ping: %+v %s, want {}", m.Error, m.Result)
	}

	list := alice.call("tools/list", nil)
	if list.Error != nil {
		t.Fatalf("tools/list: %v", list.Error)
	}
	for _, field := range []string{`"resultType"`, `"ttlMs"`, `"cacheScope"`} {
		if strings.Contains(string(list.Result), field) {
			t.Errorf("tools/list result carries the 2026-07-28 field %s: %s", field, list.Result)
		}
	}
	for _, tool := range []string{taskruntime.ToolSteps, taskruntime.ToolEcho, taskruntime.ToolInterview, taskruntime.ToolFailJob} {
		if !strings.Contains(string(list.Result), `"`+tool+`"`) {
			t.Errorf("tools/list lacks %s: %s", tool, list.Result)
		}
	}

	if got := textOf(t, alice.call("tools/call", map[string]any{"name": taskruntime.ToolEcho, "arguments": map[string]any{"text": "héllo"}})); got != "echo: héllo" {
		t.Errorf("echo: %q", got)
	}
	// The fixture runs steps only as a task: the gateway waits for it.
	steps := alice.call("tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 3, "stepMs": 10, "label": "rev"}})
	if got := textOf(t, steps); got != "Completed 3 steps for rev" {
		t.Errorf("steps: %q", got)
	}
	if strings.Contains(string(steps.Result), "resultType") {
		t.Errorf("steps result carries resultType: %s", steps.Result)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 1 {
		t.Errorf("the fixture made %d steps tasks, want 1", n)
	}
	// A JSON-RPC error of the tool comes back as the error, on HTTP 200.
	if m := alice.call("tools/call", map[string]any{"name": taskruntime.ToolFailJob, "arguments": map[string]any{"kind": "rpc", "steps": 1, "stepMs": 0}}); m.Error == nil || !strings.Contains(m.Error.Message, "Simulated failure") {
		t.Errorf("fail_job: %+v %s, want its error", m.Error, m.Result)
	}

	// Progress of a plain call reaches the client on the call's stream,
	// with its own token.
	body, _ := jsonrpc.RequestBytes(json.RawMessage("77"), "tools/call", map[string]any{"name": taskruntime.ToolFailJob,
		"arguments": map[string]any{"kind": "tool", "steps": 2, "stepMs": 0}, "_meta": map[string]any{"progressToken": "p-1"}})
	s := alice.open(context.Background(), body)
	progress := 0
	var final *jsonrpc.Message
	for m := s.next(); m != nil; m = s.next() {
		switch {
		case m.Method == "notifications/progress" && strings.Contains(string(m.Params), `"p-1"`):
			progress++
		case m.IsResponse():
			final = m
		}
	}
	s.close()
	if progress != 2 || final == nil || !strings.Contains(string(final.Result), `"isError":true`) {
		t.Errorf("fail_job with progress: %d progress notifications and final %+v, want 2 and the tool error", progress, final)
	}

	for _, code := range []int{taskruntime.CodeHeaderMismatch, taskruntime.CodeInvalidParams, taskruntime.CodeUnsupportedVersion} {
		if n := rt.Rejections(code); n != 0 {
			t.Errorf("the fixture refused %d requests with %d, want none", n, code)
		}
	}

	// The session is alice's: bob naming it gets 404, as for any session.
	bob := reverseClient(t, gw, "bob")
	bob.session, bob.version = alice.session, "2025-11-25"
	bobBody, _ := jsonrpc.RequestBytes(json.RawMessage("1"), "tools/list", nil)
	resp := bob.post(context.Background(), bobBody)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob using alice's session: HTTP %d, want 404", resp.StatusCode)
	}
	if code, _ := rawSessionRequest(t, bob, http.MethodDelete, alice.session); code != http.StatusNotFound {
		t.Errorf("bob deleting alice's session: HTTP %d, want 404", code)
	}

	// No GET stream; DELETE ends the session.
	if code, h := rawSessionRequest(t, alice, http.MethodGet, alice.session); code != http.StatusMethodNotAllowed || !strings.Contains(h.Get("Allow"), "POST") {
		t.Errorf("GET on the session: HTTP %d Allow %q, want 405", code, h.Get("Allow"))
	}
	if code, _ := rawSessionRequest(t, alice, http.MethodDelete, alice.session); code != http.StatusNoContent {
		t.Errorf("DELETE of the session: HTTP %d, want 204", code)
	}
	pingBody, _ := jsonrpc.RequestBytes(json.RawMessage("9"), "ping", nil)
	resp = alice.post(context.Background(), pingBody)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("ping on the ended session: HTTP %d, want 404", resp.StatusCode)
	}
}
