package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
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
	t.Helper()
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

// taskResult reads tasks/result of id on c, answering each elicitation
// with answer(message), and returns the final response and the
// elicitation messages seen.
func taskResult(t *testing.T, c *rpcClient, id string, answer func(message string) any) (*jsonrpc.Message, []string) {
	t.Helper()
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"result-`+id+`"`), "tasks/result", map[string]string{"taskId": id})
	return answeredStream(t, c, body, answer)
}

// answeredStream posts body on c and reads its answer, answering each
// elicitation on it with answer(message) (a POST of the response on the
// session), and returns the final response and the elicitation messages
// seen.
func answeredStream(t *testing.T, c *rpcClient, body []byte, answer func(message string) any) (*jsonrpc.Message, []string) {
	t.Helper()
	stream := c.open(context.Background(), body)
	defer stream.close()
	var asked []string
	for {
		m := stream.next()
		switch {
		case m == nil:
			t.Fatalf("%s: the answer ended without a response", body)
		case m.IsRequest() && m.Method == "elicitation/create":
			var p struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(m.Params, &p)
			asked = append(asked, p.Message)
			reply, _ := jsonrpc.ResponseBytes(m.ID, answer(p.Message))
			if code := c.send(reply); code != http.StatusAccepted {
				t.Fatalf("answering %q: HTTP %d", p.Message, code)
			}
		case m.IsResponse():
			return m, asked
		}
	}
}

// interviewAnswers answers the fixture's interview: Rex, red, do not save.
func interviewAnswers(message string) any {
	switch {
	case strings.Contains(message, "name"):
		return map[string]any{"action": "accept", "content": map[string]any{"name": "Rex"}}
	case strings.Contains(message, "colour"):
		return map[string]any{"action": "accept", "content": map[string]any{"color": "red"}}
	}
	return map[string]any{"action": "accept", "content": map[string]any{"save": false}}
}

// TestReverseBridgeTasks: a 2025-11-25 client's tasks on a 2026-07-28-only
// upstream that runs tasks itself. Each task-augmented call is the
// gateway's 2025-11-25 task following the upstream's: its result on
// tasks/result, its input requests as elicitations on that stream (the
// answers go on with tasks/update), its cancel reaching the upstream's
// task, refused to another principal, and followed again after a gateway
// restart (not re-run).
func TestReverseBridgeTasks(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	// The fixture binds no task to the Authorization it sees: the gateway
	// stores no credentials, so after its restart it follows the task
	// without the caller's (see "Task-aware upstreams" in the README).
	// Principals are kept apart by the gateway, which this test checks.
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond, BindHeader: "-"})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: hmacAuth})
	alice := reverseClient(t, gw, "alice")
	init := alice.initialize(`{"elicitation":{"form":{}}}`)
	if !strings.Contains(string(init.Result), `"tasks":{`) || !strings.Contains(string(init.Result), `"requests":{"tools":{"call":{}}}`) {
		t.Errorf("initialize result %s lacks the gateway's tasks capability", init.Result)
	}
	if list := alice.call("tools/list", nil); !strings.Contains(string(list.Result), `"taskSupport":"optional"`) {
		t.Errorf("tools/list %s lacks the tools' task modes", list.Result)
	}

	// A task the upstream runs: the gateway's own id, the upstream's result.
	steps := alice.createTask(taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 10, "label": "task"}, 60000)
	final, _ := taskResult(t, alice, steps.TaskID, nil)
	if got := textOf(t, final); got != "Completed 3 steps for task" || strings.Contains(string(final.Result), "resultType") {
		t.Errorf("steps task result: %s", final.Result)
	}
	if ids := rt.TaskIDs(taskruntime.ToolSteps); len(ids) != 1 || ids[0] == steps.TaskID {
		t.Errorf("upstream steps tasks %v for gateway task %s: want one of the upstream's own", ids, steps.TaskID)
	}
	if got := alice.getTask(steps.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get of the steps task: %+v", got)
	}

	// Input: two rounds of elicitations on tasks/result.
	interview := alice.createTask(taskruntime.ToolInterview, map[string]any{"stepMs": 0}, 60000)
	final, asked := taskResult(t, alice, interview.TaskID, interviewAnswers)
	if got := textOf(t, final); got != "Hello Rex, you like red; saved: false" || len(asked) != 3 {
		t.Errorf("interview: %q after %q", got, asked)
	}

	// Another principal: the task answers as one that never existed.
	bob := reverseClient(t, gw, "bob")
	bob.initialize(`{}`)
	if m := bob.call("tasks/get", map[string]string{"taskId": interview.TaskID}); m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("bob's tasks/get of alice's task: %s %+v, want -32602", m.Result, m.Error)
	}

	// Cancel reaches the upstream's task.
	rt.Hold(taskruntime.ToolSteps, 2)
	held := alice.createTask(taskruntime.ToolSteps, map[string]any{"steps": 4, "stepMs": 0, "label": "held"}, 60000)
	waitFor(t, 30*time.Second, "the upstream's statusMessage", func() bool { return alice.getTask(held.TaskID).StatusMessage == "step 2 of 4" })
	if m := alice.call("tasks/cancel", map[string]string{"taskId": held.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), `"cancelled"`) {
		t.Errorf("tasks/cancel: %s %+v", m.Result, m.Error)
	}
	waitFor(t, 30*time.Second, "the upstream's task cancelled", func() bool { return rt.CancelRequests(taskruntime.ToolSteps) >= 1 })
	rt.Unhold(taskruntime.ToolSteps)
	rt.ReleaseAll(taskruntime.ToolSteps)

	// A restart while the upstream's task waits for input: followed again
	// by its recorded id, on the same session.
	again := alice.createTask(taskruntime.ToolInterview, map[string]any{"stepMs": 0}, 60000)
	waitFor(t, 30*time.Second, "input_required", func() bool { return alice.getTask(again.TaskID).Status == "input_required" })
	killGateway(t, gw)
	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: hmacAuth})
	alice.url = gw2.URL
	final, asked = taskResult(t, alice, again.TaskID, interviewAnswers)
	if got := textOf(t, final); got != "Hello Rex, you like red; saved: false" || len(asked) != 3 {
		t.Errorf("interview after the restart: %q after %q", got, asked)
	}
	if n := rt.TasksCreated(taskruntime.ToolInterview); n != 2 {
		t.Errorf("upstream interview tasks: %d, want 2 (the restarted one followed again, not re-run)", n)
	}
}

// TestReverseBridgePlainInput: a plain tools/call whose upstream asks for
// input reaches the 2025-11-25 client as elicitations on the call's own
// stream, as a 2025-11-25 server asks; the answers go back to the
// upstream, as the retry of a multi-round-trip call (the fixture's
// optional interview) or with tasks/update to the upstream's task awaited
// on the call (the interview made task-only).
func TestReverseBridgePlainInput(t *testing.T) {
	t.Parallel()
	for _, mode := range []taskruntime.TaskMode{taskruntime.ModeOptional, taskruntime.ModeRequired} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond,
				Modes: map[string]taskruntime.TaskMode{taskruntime.ToolInterview: mode}})
			gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"), Directives: hmacAuth})
			alice := reverseClient(t, gw, "alice")
			alice.initialize(`{"elicitation":{"form":{}}}`)
			body, _ := jsonrpc.RequestBytes(json.RawMessage("5"), "tools/call", map[string]any{"name": taskruntime.ToolInterview, "arguments": map[string]any{"stepMs": 0}})
			final, asked := answeredStream(t, alice, body, interviewAnswers)
			if got := textOf(t, final); got != "Hello Rex, you like red; saved: false" || len(asked) != 3 {
				t.Errorf("interview: %q after %q", got, asked)
			}
			wantTasks := 0
			if mode == taskruntime.ModeRequired {
				wantTasks = 1
			}
			if n := rt.TasksCreated(taskruntime.ToolInterview); n != wantTasks {
				t.Errorf("upstream interview tasks: %d, want %d", n, wantTasks)
			}

			// Answers from another principal's session are not taken:
			// bob answers the first round first, as Mallory; the next
			// round still asks about Rex, whom alice names.
			bob := reverseClient(t, gw, "bob")
			bob.initialize(`{"elicitation":{"form":{}}}`)
			stream := alice.open(context.Background(), body)
			defer stream.close()
			var round []*jsonrpc.Message
			for len(round) < 2 {
				m := stream.next()
				if m == nil || !m.IsRequest() {
					t.Fatalf("the call's first round: %+v, want two input requests", m)
				}
				round = append(round, m)
			}
			for _, m := range round {
				reply, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"name": "Mallory", "color": "blue"}})
				if code := bob.send(reply); code != http.StatusAccepted {
					t.Errorf("bob's answer: HTTP %d, want 202 (as any response)", code)
				}
			}
			for _, m := range round {
				var p struct{ Message string }
				_ = json.Unmarshal(m.Params, &p)
				reply, _ := jsonrpc.ResponseBytes(m.ID, interviewAnswers(p.Message))
				alice.send(reply)
			}
			next := stream.next()
			if next == nil || !next.IsRequest() || !strings.Contains(string(next.Params), "Save the profile of Rex?") {
				t.Fatalf("the second round: %+v, want the question about Rex", next)
			}
			reply, _ := jsonrpc.ResponseBytes(next.ID, interviewAnswers("save"))
			alice.send(reply)
			if final := stream.next(); final == nil || textOf(t, final) != "Hello Rex, you like red; saved: false" {
				t.Errorf("the second interview's result: %+v", final)
			}
		})
	}
}
