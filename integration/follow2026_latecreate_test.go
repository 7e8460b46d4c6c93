package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// A 2026-07-28 task runtime slow to answer the tools/call that creates its
// task: the fixture holds the CreateTaskResult back (HoldAnswers) while
// its task runs. Whatever ends the gateway's task before that answer
// comes, the upstream's task must be cancelled once the answer names it,
// and count against max_active_per_principal until then.

// longSteps runs for minutes unless cancelled.
func longSteps() map[string]any { return map[string]any{"steps": 1000, "stepMs": 100} }

// waitUpstreamCancelled waits for the fixture's task id to end cancelled
// after a tasks/cancel.
func waitUpstreamCancelled(t *testing.T, rt *taskruntime.Server, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	v, err := rt.WaitTask(ctx, id, func(v taskruntime.TaskView) bool { return v.Status.Terminal() })
	if err != nil || v.Status != taskruntime.StatusCancelled || !v.CancelRequested {
		t.Fatalf("upstream task %s: %s, cancel requested %v (%v); want cancelled by the gateway", id, v.Status, v.CancelRequested, err)
	}
}

// TestFollowV2026EndedBeforeCreateResult: a declaring client's call
// becomes a gateway task at task_after while the upstream holds its
// CreateTaskResult; the task is then cancelled, or stopped by its
// run_timeout. The client sees it ended at once; under
// max_active_per_principal 1 a second create is refused while the
// upstream's task may still run; once the answer comes, the gateway sends
// tasks/cancel for the task it names, and creates are taken again.
func TestFollowV2026EndedBeforeCreateResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, directives, want string
		end                    func(t *testing.T, c *taskRuntimeClient, id string)
	}{{
		name: "cancel", directives: "task_after 100ms\nmax_active_per_principal 1", want: "cancelled",
		end: func(t *testing.T, c *taskRuntimeClient, id string) {
			if r := c.send(t, "tasks/cancel", map[string]any{"taskId": id}); r.Error != nil {
				t.Fatalf("tasks/cancel: %s", r.raw)
			}
		},
	}, {
		name: "run_timeout", directives: "task_after 100ms\nmax_active_per_principal 1\nrun_timeout 1s", want: "failed",
		end: func(*testing.T, *taskRuntimeClient, string) {},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, _, gw := taskRuntimeGateway(t, "", tc.directives)
			rt.HoldAnswers(taskruntime.ToolSteps)
			c := newTaskRuntimeClient(gw.URL, "Bearer late-"+tc.name)
			id := c.mustCreate(t, taskruntime.ToolSteps, longSteps())
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ids, err := rt.WaitTaskIDs(ctx, taskruntime.ToolSteps, 1)
			if err != nil {
				t.Fatal(err)
			}
			tc.end(t, c, id)
			waitGatewayTask(t, c, id, "the gateway task to end "+tc.want, statusIs(tc.want))

			heldUntilUpstreamCancelled(t, rt, c, taskruntime.ToolSteps, ids[0])
		})
	}
}

// TestFollowV2026PlainClientLeavesBeforeCreateResult: a plain client's
// call of the task-only steps tool; the gateway calls again declaring the
// extension, and the upstream holds that call's CreateTaskResult. The
// client leaves meanwhile; once the answer comes, the gateway cancels the
// upstream's task, which nobody waits for.
func TestFollowV2026PlainClientLeavesBeforeCreateResult(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "")
	rt.HoldAnswers(taskruntime.ToolSteps)
	params := map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps(), "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion": taskruntime.ProtocolVersion, "io.modelcontextprotocol/clientCapabilities": map[string]any{}}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
	ctx, leave := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", taskruntime.ProtocolVersion)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", taskruntime.ToolSteps)
	req.Header.Set("Authorization", "Bearer leaver")
	leaveBeforeCreateResult(t, rt, req, leave)
}

// leaveBeforeCreateResult sends req, a plain call of the steps tool whose
// upstream holds the CreateTaskResult, and leaves (leave ends req's
// context) once the upstream has made its task. The gateway reads on after
// the client left; once the answer is released, it must cancel that task,
// which nobody waits for.
func leaveBeforeCreateResult(t *testing.T, rt *taskruntime.Server, req *http.Request, leave context.CancelFunc) {
	t.Helper()
	id := leaveWhileCreateHeld(t, rt, taskruntime.ToolSteps, req, leave)
	rt.ReleaseAnswers(taskruntime.ToolSteps)
	waitUpstreamCancelled(t, rt, id)
}

// leaveWhileCreateHeld sends req, a call of tool whose upstream holds the
// CreateTaskResult, leaves once the upstream has made its task, and
// returns that task's id; the answer is still held.
func leaveWhileCreateHeld(t *testing.T, rt *taskruntime.Server, tool string, req *http.Request, leave context.CancelFunc) string {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		resp, err := httpClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	wctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := rt.WaitTaskIDs(wctx, tool, 1)
	if err != nil {
		leave()
		t.Fatal(err)
	}
	leave()
	if err := <-done; err == nil {
		t.Fatal("the call was answered while the upstream held its CreateTaskResult")
	}
	// The gateway reads on after the client left: its call is still open.
	if v, _ := rt.Task(ids[0]); v.Status.Terminal() {
		t.Fatalf("upstream task ended before the answer: %s", v.Status)
	}
	return ids[0]
}

// TestFollowV2026PlainCallsWithinQuota: ten concurrent plain calls of the
// task-only steps tool, under max_active_per_principal 3. Each would make
// a task at the upstream that runs for the caller; three are admitted and
// wait for their upstream task, the other seven are refused with -32000
// before the upstream makes any, and the admitted ones get their results.
func TestFollowV2026PlainCallsWithinQuota(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "max_active_per_principal 3")
	rt.Hold(taskruntime.ToolSteps, 1)
	t.Cleanup(func() { rt.ReleaseAll(taskruntime.ToolSteps) })
	const calls, limit = 10, 3
	answers := make(chan taskRuntimeReply, calls)
	for range calls {
		go func() {
			answers <- sendPlain(t, gw.URL, "Bearer plenty", "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 2, "stepMs": 0}})
		}()
	}
	hang := time.After(60 * time.Second)
	next := func(what string) taskRuntimeReply {
		t.Helper()
		select {
		case r := <-answers:
			return r
		case <-hang:
			t.Fatalf("no answer %s within a minute (upstream tasks created: %d)", what, rt.TasksCreated(taskruntime.ToolSteps))
		}
		return taskRuntimeReply{}
	}
	for i := range calls - limit {
		if r := next("refusing a call over the bound"); r.Error == nil || r.Error.Code != -32000 {
			t.Fatalf("answer %d while %d calls hold upstream tasks: %s, want -32000", i+1, limit, r.raw)
		}
	}
	// The admitted calls may still be on their way to the upstream.
	waitFor(t, 30*time.Second, "the admitted calls' upstream tasks", func() bool { return rt.TasksCreated(taskruntime.ToolSteps) >= limit })
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != limit {
		t.Fatalf("upstream tasks created: %d, want %d", n, limit)
	}
	// The operator sees them counted, though they are no gateway tasks.
	if n := plainCalls(t, gw); n != limit {
		t.Errorf("admin stores: %d plain calls, want %d", n, limit)
	}
	rt.ReleaseAll(taskruntime.ToolSteps)
	for range limit {
		if r := next("of an admitted call"); r.Error != nil || !strings.Contains(r.raw, "Completed 2 steps") {
			t.Errorf("admitted call: %s, want its result", r.raw)
		}
	}
	// Each upstream task is in the audit log, made and ended.
	waitFor(t, 30*time.Second, "the plain calls' audit lines", func() bool {
		return auditLines(t, gw, "plain call's task created at the upstream", "working") == limit &&
			auditLines(t, gw, "plain call's upstream task ended", "completed") == limit && plainCalls(t, gw) == 0
	})
}

// plainCalls is the plain_calls count of the gateway's one store.
func plainCalls(t *testing.T, gw *gateway) int {
	t.Helper()
	var stores []struct {
		PlainCalls int `json:"plain_calls"`
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/stores", &stores); code != http.StatusOK || len(stores) != 1 {
		t.Fatalf("admin stores: %d %s", code, body)
	}
	return stores[0].PlainCalls
}

// auditLines counts the gateway's audit lines of msg with status.
func auditLines(t *testing.T, gw *gateway, msg, status string) int {
	t.Helper()
	n := 0
	for s := range strings.SplitSeq(gw.logs(), "\n") {
		if !strings.Contains(s, `"logger":"http.handlers.mcp_tasks.audit"`) {
			continue
		}
		var l struct{ Msg, Status string }
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("audit line %q: %v", s, err)
		}
		if l.Msg == msg && l.Status == status {
			n++
		}
	}
	return n
}

// TestFollowV2026PlainCallRunTimeout: a plain call of the task-only steps
// tool waits on the upstream's task within the call; under run_timeout 1s
// a tool that would run for minutes fails the call with the run-timeout
// error, as a task would fail, and the upstream's task is cancelled.
func TestFollowV2026PlainCallRunTimeout(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "run_timeout 1s")
	r := sendPlain(t, gw.URL, "Bearer slowpoke", "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps()})
	if r.Error == nil || r.Error.Code != -32603 || !strings.Contains(r.Error.Message, "run_timeout") {
		t.Fatalf("plain call past its run_timeout: %s, want -32603 naming run_timeout", r.raw)
	}
	ids := rt.TaskIDs(taskruntime.ToolSteps)
	if len(ids) != 1 {
		t.Fatalf("upstream steps tasks %v, want 1", ids)
	}
	waitUpstreamCancelled(t, rt, ids[0])
	waitFor(t, 30*time.Second, "the audit line of the upstream task's end", func() bool {
		return auditLines(t, gw, "plain call's upstream task ended", "failed") == 1
	})
}

// heldUntilUpstreamCancelled checks, for a gateway task that ended while
// the upstream's task upstreamID (of tool held, whose answer the fixture
// holds) may still run, that the caller's slot stays taken: a create of
// ToolSteps is refused at max_active_per_principal 1 before it reaches
// the upstream. Once the answer is released and that upstream task
// cancelled, creates are taken again.
func heldUntilUpstreamCancelled(t *testing.T, rt *taskruntime.Server, c *taskRuntimeClient, held, upstreamID string) {
	t.Helper()
	stepsBefore := rt.TasksCreated(taskruntime.ToolSteps)
	r := c.send(t, "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps()})
	if r.Error == nil || r.Error.Code != -32000 {
		t.Fatalf("a create while the upstream task of %s may run: %s, want -32000 (max_active_per_principal 1)", held, r.raw)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != stepsBefore {
		t.Fatalf("upstream %s tasks created: %d, want %d (the create refused before the upstream)", taskruntime.ToolSteps, n, stepsBefore)
	}

	rt.ReleaseAnswers(held)
	waitUpstreamCancelled(t, rt, upstreamID)
	var next taskRuntimeReply
	waitFor(t, 60*time.Second, "a create taken once the held upstream task is cancelled", func() bool {
		next = c.send(t, "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 1, "stepMs": 0}})
		return next.Error == nil
	})
	if next.Result["resultType"] != "task" {
		t.Fatalf("create after the upstream task was cancelled: %s", next.raw)
	}
}
