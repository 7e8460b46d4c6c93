package integration

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// A 2026-07-28 task runtime may make its task for a call before the
// gateway has made its own: before task_after, and in the retry that
// carries the answers to input asked before any task (the guard pattern).
// Whatever ends the call then (its client leaving, a cancel, run_timeout),
// the upstream's task must not run on for nobody: the gateway reads the
// held CreateTaskResult on and cancels the task it names, counting it
// against max_active_per_principal until then.

// heldCallCounted waits until the gateway counts the call of a client
// that left while the upstream held its CreateTaskResult, and checks that
// it counts against max_active_per_principal 1: another create is
// refused before the upstream sees it.
func heldCallCounted(t *testing.T, rt *taskruntime.Server, gw *gateway, c *taskRuntimeClient, tool string) {
	t.Helper()
	waitFor(t, 30*time.Second, "the left call counted while the gateway reads on", func() bool { return plainCalls(t, gw) == 1 })
	r := c.send(t, "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps()})
	if r.Error == nil || r.Error.Code != -32000 {
		t.Fatalf("a create while the left call's upstream task may run: %s, want -32000 (max_active_per_principal 1)", r.raw)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps) + rt.TasksCreated(taskruntime.ToolGuarded); n != 1 {
		t.Fatalf("upstream tasks created: %d, want 1 (the second create refused before the upstream)", n)
	}
	if tool != "" && rt.TasksCreated(tool) != 1 {
		t.Fatalf("upstream %s tasks created: %d, want 1", tool, rt.TasksCreated(tool))
	}
}

// TestFollowV2026ClientLeavesBeforeTaskAfter: a client declaring the
// tasks extension calls the steps tool, which the upstream makes its task
// of at once but holds the CreateTaskResult; the client leaves long before
// task_after, so the gateway never makes a task of its own. The gateway
// reads the call on, counted for the caller, and once the answer names
// the upstream's task it cancels it; nothing stays counted.
func TestFollowV2026ClientLeavesBeforeTaskAfter(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10m\nmax_active_per_principal 1")
	rt.HoldAnswers(taskruntime.ToolSteps)
	c := newTaskRuntimeClient(gw.URL, "Bearer early-leaver")
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	req := c.request(t, ctx, "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps()})
	id := leaveWhileCreateHeld(t, rt, taskruntime.ToolSteps, req, leave)
	heldCallCounted(t, rt, gw, c, taskruntime.ToolSteps)

	rt.ReleaseAnswers(taskruntime.ToolSteps)
	waitUpstreamCancelled(t, rt, id)
	waitFor(t, 30*time.Second, "the left call no longer counted", func() bool { return plainCalls(t, gw) == 0 })
}

// TestFollowV2026GuardRetryClientLeaves: the guarded tool, configured
// required, asks for input before making any task, which the gateway
// passes to the client as an InputRequiredResult; the client's last retry
// with the answers makes the upstream's task, whose CreateTaskResult the
// upstream holds. The client leaves before it comes: the gateway cancels
// the task the retry made.
func TestFollowV2026GuardRetryClientLeaves(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10m\nmax_active_per_principal 1\ntool guarded required")
	c := newTaskRuntimeClient(gw.URL, "Bearer guard-leaver")
	args := longSteps()
	params := func(state any, responses map[string]any) map[string]any {
		p := map[string]any{"name": taskruntime.ToolGuarded, "arguments": args}
		if state != nil {
			p["requestState"], p["inputResponses"] = state, responses
		}
		return p
	}
	var state any
	for _, round := range []struct {
		asks    string
		answers map[string]any
	}{
		{"confirm", nil},
		{"reason", map[string]any{"confirm": accepted("confirm", true)}},
	} {
		r := c.send(t, "tools/call", params(state, round.answers))
		reqs, _ := r.Result["inputRequests"].(map[string]any)
		if r.Result["resultType"] != "input_required" || reqs[round.asks] == nil || r.Result["requestState"] == nil {
			t.Fatalf("the guard's round asking %s: %s, want input_required passed through", round.asks, r.raw)
		}
		state = r.Result["requestState"]
	}
	rt.HoldAnswers(taskruntime.ToolGuarded)
	ctx, leave := context.WithCancel(context.Background())
	defer leave()
	req := c.request(t, ctx, "tools/call", params(state, map[string]any{"reason": accepted("reason", "audit")}))
	id := leaveWhileCreateHeld(t, rt, taskruntime.ToolGuarded, req, leave)
	heldCallCounted(t, rt, gw, c, taskruntime.ToolGuarded)

	rt.ReleaseAnswers(taskruntime.ToolGuarded)
	waitUpstreamCancelled(t, rt, id)
	waitFor(t, 30*time.Second, "the left call no longer counted", func() bool { return plainCalls(t, gw) == 0 })
}

// TestFollowV2026GuardedEndedBeforeCreateResult: the guarded tool becomes
// the gateway's task in input_required; the client answers both rounds
// with tasks/update, and the worker's last retry makes the upstream's
// task, whose CreateTaskResult the upstream holds. The gateway's task is
// then cancelled, or stopped by its run_timeout: it shows ended at once,
// counts until the answer comes, and then the task the retry made is
// cancelled at the upstream.
func TestFollowV2026GuardedEndedBeforeCreateResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, directives, want string
		end                    func(t *testing.T, c *taskRuntimeClient, id string)
	}{{
		name: "cancel", directives: "task_after 10s\nmax_active_per_principal 1", want: "cancelled",
		end: func(t *testing.T, c *taskRuntimeClient, id string) {
			if r := c.send(t, "tasks/cancel", map[string]any{"taskId": id}); r.Error != nil {
				t.Fatalf("tasks/cancel: %s", r.raw)
			}
		},
	}, {
		// The clock runs only while the task works: the rounds of
		// input it waits in do not count.
		name: "run_timeout", directives: "task_after 10s\nmax_active_per_principal 1\nrun_timeout 3s", want: "failed",
		end: func(*testing.T, *taskRuntimeClient, string) {},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, _, gw := taskRuntimeGateway(t, "", tc.directives)
			c := newTaskRuntimeClient(gw.URL, "Bearer guarded-"+tc.name)
			id := c.mustCreate(t, taskruntime.ToolGuarded, longSteps())
			for i, round := range []struct {
				question string
				answer   map[string]any
			}{
				{"Run the guarded job?", accepted("confirm", true)},
				{"Why run the guarded job?", accepted("reason", "audit")},
			} {
				asked := waitGatewayTask(t, c, id, round.question, func(r taskRuntimeReply) bool {
					return r.Result["status"] == "input_required" && asks(r, round.question)
				})
				if i == 1 {
					rt.HoldAnswers(taskruntime.ToolGuarded) // the retry with this answer makes the task
				}
				key := gatewayInputKey(t, asked, round.question)
				if r := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: round.answer}}); r.Error != nil {
					t.Fatalf("tasks/update (%s): %s", round.question, r.raw)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ids, err := rt.WaitTaskIDs(ctx, taskruntime.ToolGuarded, 1)
			if err != nil {
				t.Fatal(err)
			}
			tc.end(t, c, id)
			waitGatewayTask(t, c, id, "the gateway task to end "+tc.want, statusIs(tc.want))

			heldUntilUpstreamCancelled(t, rt, c, taskruntime.ToolGuarded, ids[0])
		})
	}
}
