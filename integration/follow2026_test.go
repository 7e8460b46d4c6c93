package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// Task-aware 2026-07-28 upstreams, end to end: the task runtime fixture
// (integration/upstream/taskruntime) behind the real ./caddy. The gateway
// learns from the upstream's server/discover that it runs tasks itself,
// keeps the extension on the calls it forwards, and makes each upstream
// CreateTaskResult a task of its own that follows the upstream's.

// taskRuntimeGateway starts the fixture in this process and a gateway in
// front of it (storage in store, "" for a fresh directory).
func taskRuntimeGateway(t *testing.T, store, directives string) (*taskruntime.Server, string, *gateway) {
	t.Helper()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	return rt, addr, startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: directives})
}

// followedUpstreamID waits for the upstream task the admin API names for a
// gateway task, and returns it.
func followedUpstreamID(t *testing.T, gw *gateway, id string) string {
	t.Helper()
	var up string
	waitFor(t, 30*time.Second, "the upstream task id in the admin API", func() bool {
		up = adminUpstreamTaskID(t, gw, id)
		return up != ""
	})
	return up
}

// waitGatewayTask polls the gateway's tasks/get until cond holds.
func waitGatewayTask(t *testing.T, c *taskRuntimeClient, id, what string, cond func(taskRuntimeReply) bool) taskRuntimeReply {
	t.Helper()
	var last taskRuntimeReply
	waitFor(t, 60*time.Second, what, func() bool {
		last = c.get(t, id)
		return cond(last)
	})
	return last
}

func statusIs(want string) func(taskRuntimeReply) bool {
	return func(r taskRuntimeReply) bool { return r.Result["status"] == want }
}

// TestFollowV2026Required: a 2026-07-28 client that declares the extension
// calls the fixture's steps tool (which the upstream runs only as a task)
// through the gateway. The answer is the gateway's CreateTaskResult under
// an id of its own; the gateway follows the upstream's task, shows its
// "step k of n" while it works and its result once it completes, and the
// admin API names the upstream's task. The fixture saw every tasks/get with
// the right Mcp-Name (it refuses any other).
func TestFollowV2026Required(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10s")
	rt.Hold(taskruntime.ToolSteps, 2)
	c := newTaskRuntimeClient(gw.URL, "Bearer alice")
	id := c.mustCreate(t, taskruntime.ToolSteps, map[string]any{"steps": 4, "stepMs": 0, "label": "followed"})

	upID := followedUpstreamID(t, gw, id)
	if upID == id {
		t.Errorf("the gateway answered the upstream's task id %q, want one of its own", id)
	}
	if v, ok := rt.Task(upID); !ok || v.Tool != taskruntime.ToolSteps {
		t.Fatalf("the admin API names upstream task %q, which the fixture does not know as a steps task", upID)
	}
	// caddy mcp-tasks show names it too, as the console does.
	out, errOut, ok := runCaddy(t, "mcp-tasks", "show", id, "--address", gw.adminAddr)
	if !ok || !slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
		return slices.Equal(strings.Fields(line), []string{"upstream", "task:", upID})
	}) {
		t.Errorf("show does not name the upstream task %s:\n%s%s", upID, out, errOut)
	}
	waitGatewayTask(t, c, id, "the upstream's status message", func(r taskRuntimeReply) bool {
		return r.Result["status"] == "working" && r.Result["statusMessage"] == "step 2 of 4"
	})
	if err := rt.Release(upID); err != nil {
		t.Fatal(err)
	}
	done := waitGatewayTask(t, c, id, "the followed task to complete", statusIs("completed"))
	if !strings.Contains(done.raw, "Completed 4 steps for followed") {
		t.Errorf("completed task: %s, want the upstream's result", done.raw)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 1 {
		t.Errorf("the fixture made %d steps tasks, want 1", n)
	}
	for _, code := range []int{taskruntime.CodeHeaderMismatch, taskruntime.CodeMissingCapability} {
		if n := rt.Rejections(code); n != 0 {
			t.Errorf("the fixture refused %d requests with %d", n, code)
		}
	}
	if rt.Gets(upID) == 0 {
		t.Error("the gateway never polled the upstream's tasks/get")
	}
	// Another caller of the gateway cannot read it (bound to its owner
	// through the gateway's own check, not the upstream's).
	if got := newTaskRuntimeClient(gw.URL, "Bearer alice").get(t, upID); got.Error == nil {
		t.Errorf("the upstream's own task id answers through the gateway: %s", got.raw)
	}
}

// sendPlain sends a 2026-07-28 request that does not declare the tasks
// extension, with every routing header, and returns the decoded answer.
func sendPlain(t *testing.T, url, auth, method string, params map[string]any) taskRuntimeReply { //nolint:unparam // the call names its method as sendPlainCaps's do
	t.Helper()
	return sendPlainCaps(t, url, auth, method, params, map[string]any{})
}

// sendPlainCaps is sendPlain for a client that declares caps (but not the
// tasks extension).
func sendPlainCaps(t *testing.T, url, auth, method string, params, caps map[string]any) taskRuntimeReply {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    taskruntime.ProtocolVersion,
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", taskruntime.ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	req.Header.Set("Authorization", auth)
	return doTaskRuntimeRequest(t, req, method)
}

// gatewayInputKey returns the gateway's key of the input request whose
// message contains text, from a tasks/get answer in input_required.
func gatewayInputKey(t *testing.T, r taskRuntimeReply, text string) string {
	t.Helper()
	reqs, _ := r.Result["inputRequests"].(map[string]any)
	for k, v := range reqs {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), text) {
			return k
		}
	}
	t.Fatalf("no input request asks %q: %s", text, r.raw)
	return ""
}

// hasInputKey reports whether a tasks/get answer asks text.
func asks(r taskRuntimeReply, text string) bool {
	reqs, _ := r.Result["inputRequests"].(map[string]any)
	for _, v := range reqs {
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), text) {
			return true
		}
	}
	return false
}

// TestFollowV2026Input: the fixture's interview (optional, so a task only
// because the client declared the extension) asks two questions, then a
// third. The gateway's task shows them as inputRequests under keys of its
// own; the client answers one (a partial set, which the upstream keeps),
// then the other, then the third, each with the gateway's tasks/update, and
// the task completes with the upstream's result.
func TestFollowV2026Input(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10s")
	c := newTaskRuntimeClient(gw.URL, "Bearer bo")
	id := c.mustCreate(t, taskruntime.ToolInterview, map[string]any{"stepMs": 0})
	upID := followedUpstreamID(t, gw, id)

	first := waitGatewayTask(t, c, id, "both first-round questions", func(r taskRuntimeReply) bool {
		return r.Result["status"] == "input_required" && asks(r, "What is your name?") && asks(r, "favourite colour")
	})
	nameKey, colorKey := gatewayInputKey(t, first, "What is your name?"), gatewayInputKey(t, first, "favourite colour")
	if nameKey == "name" || colorKey == "color" {
		t.Errorf("the gateway shows the upstream's keys (%s, %s), want its own", nameKey, colorKey)
	}
	if r := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{nameKey: accepted("name", "Ada")}}); r.Error != nil {
		t.Fatalf("tasks/update (name): %s", r.raw)
	}
	if _, err := rt.WaitTask(context.Background(), upID, func(v taskruntime.TaskView) bool {
		return len(v.Answered) == 1 && v.Answered[0] == "name"
	}); err != nil {
		t.Fatalf("the partial answer never reached the upstream: %v", err)
	}
	if got := c.get(t, id); got.Result["status"] != "input_required" || !asks(got, "favourite colour") || asks(got, "What is your name?") {
		t.Errorf("after the partial answer: %s, want only the colour still asked", got.raw)
	}
	c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{colorKey: accepted("color", "teal")}})
	second := waitGatewayTask(t, c, id, "the second round", func(r taskRuntimeReply) bool { return asks(r, "Save the profile of Ada?") })
	saveKey := gatewayInputKey(t, second, "Save the profile")
	if saveKey == nameKey || saveKey == colorKey {
		t.Errorf("key %s reused", saveKey)
	}
	c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{saveKey: accepted("save", true)}})
	done := waitGatewayTask(t, c, id, "the interview to complete", statusIs("completed"))
	if !strings.Contains(done.raw, "Hello Ada, you like teal; saved: true") {
		t.Errorf("completed interview: %s", done.raw)
	}
	if n := rt.Rejections(taskruntime.CodeHeaderMismatch); n != 0 {
		t.Errorf("the fixture refused %d requests for their headers", n)
	}
}

// TestFollowV2026CancelAndFailure: tasks/cancel of a followed task reaches
// the upstream as tasks/cancel of its task, which ends cancelled; a task
// the upstream fails with a JSON-RPC error fails with that error, and one
// that completes with isError completes with that result.
func TestFollowV2026CancelAndFailure(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10s")
	rt.Hold(taskruntime.ToolSteps, 1)
	c := newTaskRuntimeClient(gw.URL, "Bearer cy")

	id := c.mustCreate(t, taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 0})
	upID := followedUpstreamID(t, gw, id)
	if r := c.send(t, "tasks/cancel", map[string]any{"taskId": id}); r.Error != nil {
		t.Fatalf("tasks/cancel: %s", r.raw)
	}
	if v, err := rt.WaitTask(context.Background(), upID, func(v taskruntime.TaskView) bool { return v.CancelRequested }); err != nil || !v.CancelRequested {
		t.Fatalf("the upstream's task was never asked to cancel: %v", err)
	}
	_ = rt.Release(upID)
	if v, err := rt.WaitTask(context.Background(), upID, func(v taskruntime.TaskView) bool { return v.Status.Terminal() }); err != nil || v.Status != taskruntime.StatusCancelled {
		t.Errorf("upstream task ended %s (%v), want cancelled", v.Status, err)
	}
	if got := c.get(t, id); got.Result["status"] != "cancelled" {
		t.Errorf("gateway task after cancel: %s", got.raw)
	}
	rt.Unhold(taskruntime.ToolSteps)

	failed := c.mustCreate(t, taskruntime.ToolFailJob, map[string]any{"steps": 1, "stepMs": 0})
	got := waitGatewayTask(t, c, failed, "fail_job to fail", statusIs("failed"))
	if !strings.Contains(got.raw, "Simulated failure after 1 steps") || !strings.Contains(got.raw, "-32603") {
		t.Errorf("failed task: %s, want the upstream's error", got.raw)
	}
	toolErr := c.mustCreate(t, taskruntime.ToolFailJob, map[string]any{"steps": 1, "stepMs": 0, "kind": "tool"})
	got = waitGatewayTask(t, c, toolErr, "the tool error to complete", statusIs("completed"))
	if !strings.Contains(got.raw, `"isError":true`) || !strings.Contains(got.raw, "Job failed: simulated tool error") {
		t.Errorf("tool-error task: %s", got.raw)
	}
}

// TestFollowV2026PlainClient: a 2026-07-28 client without the extension
// gets the final result of steps (which the upstream runs only as a task,
// refusing a plain call with -32021) on its own call: the gateway calls
// again with the extension and waits for the upstream's task. An optional
// tool runs plainly at the upstream, and a forbidden one answers at once.
func TestFollowV2026PlainClient(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "")
	r := sendPlain(t, gw.URL, "Bearer dee", "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 3, "stepMs": 0, "label": "plain"}})
	if r.Error != nil || !strings.Contains(r.raw, "Completed 3 steps for plain") {
		t.Fatalf("plain call of the task-only tool: %s, want its result", r.raw)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 1 {
		t.Errorf("upstream steps tasks: %d, want 1", n)
	}
	r = sendPlain(t, gw.URL, "Bearer dee", "tools/call", map[string]any{"name": taskruntime.ToolFailJob, "arguments": map[string]any{"steps": 1, "stepMs": 0, "kind": "tool"}})
	if !strings.Contains(r.raw, "Job failed: simulated tool error") || rt.TasksCreated(taskruntime.ToolFailJob) != 0 {
		t.Errorf("plain call of an optional tool: %s (upstream tasks %d), want a plain result", r.raw, rt.TasksCreated(taskruntime.ToolFailJob))
	}
	r = sendPlain(t, gw.URL, "Bearer dee", "tools/call", map[string]any{"name": taskruntime.ToolEcho, "arguments": map[string]any{"text": "hi"}})
	if !strings.Contains(r.raw, "echo: hi") {
		t.Errorf("plain echo: %s", r.raw)
	}
	// With the extension, the forbidden tool is still answered at once.
	r = newTaskRuntimeClient(gw.URL, "Bearer dee").send(t, "tools/call", map[string]any{"name": taskruntime.ToolEcho, "arguments": map[string]any{"text": "ho"}})
	if r.Result["resultType"] == "task" || !strings.Contains(r.raw, "echo: ho") {
		t.Errorf("echo with the extension: %s, want the immediate result", r.raw)
	}
}

// TestFollowV2026GatewayRestart: the gateway is killed while following an
// upstream task that waits for input; the restarted gateway (same Badger
// store) follows it again by its recorded id: the input requests are still
// the task's, the answer reaches the upstream, and the task completes.
func TestFollowV2026GatewayRestart(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	rt, addr, gw := taskRuntimeGateway(t, store, "task_after 10s")
	c := newTaskRuntimeClient(gw.URL, "")
	id := c.mustCreate(t, taskruntime.ToolInterview, map[string]any{"stepMs": 0})
	upID := followedUpstreamID(t, gw, id)
	first := waitGatewayTask(t, c, id, "the first round", func(r taskRuntimeReply) bool {
		return asks(r, "What is your name?") && asks(r, "favourite colour")
	})
	killGateway(t, gw)

	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: "task_after 10s"})
	c.url = gw2.URL
	if got := c.get(t, id); got.Result["status"] != "input_required" || !asks(got, "What is your name?") {
		t.Errorf("after the restart: %s, want the same questions", got.raw)
	}
	c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		gatewayInputKey(t, first, "What is your name?"): accepted("name", "Rex"),
		gatewayInputKey(t, first, "favourite colour"):   accepted("color", "red"),
	}})
	second := waitGatewayTask(t, c, id, "the second round after the restart", func(r taskRuntimeReply) bool { return asks(r, "Save the profile of Rex?") })
	c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{gatewayInputKey(t, second, "Save the profile"): accepted("save", false)}})
	done := waitGatewayTask(t, c, id, "the interview to complete", statusIs("completed"))
	if !strings.Contains(done.raw, "Hello Rex, you like red; saved: false") {
		t.Errorf("completed after the restart: %s", done.raw)
	}
	if got := adminUpstreamTaskID(t, gw2, id); got != upID {
		t.Errorf("after the restart the admin API names %q, want %q", got, upID)
	}
	if n := rt.TasksCreated(taskruntime.ToolInterview); n != 1 {
		t.Errorf("upstream interview tasks: %d, want 1 (followed again, not re-run)", n)
	}
}
