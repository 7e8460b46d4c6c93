package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
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
func sendPlain(t *testing.T, url, auth, method string, params map[string]any) taskRuntimeReply {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    taskruntime.ProtocolVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
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
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := taskRuntimeReply{raw: string(b)}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: decoding %q: %v", method, b, err)
	}
	return r
}

