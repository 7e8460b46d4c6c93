package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestTaskRuntimeIntegralFloats runs every kind of client through the real
// ./caddy in front of the task runtime fixture behaving as fastmcp-tasks
// does: ttlMs, pollIntervalMs, progress and total written as integral
// floats ("pollIntervalMs":20.0), and a worker that picks each task up
// about 50 ms after the task answered working. JSON Schema's integer
// includes 20.0, so the gateway must follow the upstream's tasks as it
// does for 20: its own task id to a 2026-07-28 client that declares the
// extension, a 2025-11-25 task to a client of the reverse bridge, and the
// final result on the call of a client that asked for no task.
func TestTaskRuntimeIntegralFloats(t *testing.T) {
	t.Parallel()
	runtimeLike := taskruntime.Options{PollInterval: 20 * time.Millisecond, IntegralFloats: true, PickupDelay: 50 * time.Millisecond}
	tests := []struct {
		name string
		run  func(t *testing.T, rt *taskruntime.Server, addr string)
	}{
		{"2026-07-28 client following", func(t *testing.T, rt *taskruntime.Server, addr string) {
			gw := startGateway(t, gatewayOptions{Upstream: addr})
			c := newTaskRuntimeClient(gw.URL, "Bearer alice")
			id := c.mustCreate(t, taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 0, "label": "floats"})
			upID := followedUpstreamID(t, gw, id)
			if upID == id {
				t.Errorf("the gateway answered the upstream's task id %q, want one of its own", id)
			}
			done := waitGatewayTask(t, c, id, "the followed task to complete", statusIs("completed"))
			if !strings.Contains(done.raw, "Completed 3 steps for floats") {
				t.Errorf("completed task: %s, want the upstream's result", done.raw)
			}
			if rt.Gets(upID) == 0 {
				t.Error("the gateway never polled the upstream's tasks/get")
			}
		}},
		{"2026-07-28 client following with input", func(t *testing.T, rt *taskruntime.Server, addr string) {
			gw := startGateway(t, gatewayOptions{Upstream: addr})
			c := newTaskRuntimeClient(gw.URL, "Bearer bea")
			id := c.mustCreate(t, taskruntime.ToolInterview, map[string]any{"stepMs": 0})
			followedUpstreamID(t, gw, id)
			first := waitGatewayTask(t, c, id, "both first-round questions", func(r taskRuntimeReply) bool {
				return r.Result["status"] == "input_required" && asks(r, "What is your name?") && asks(r, "favourite colour")
			})
			answers := map[string]any{
				gatewayInputKey(t, first, "What is your name?"): accepted("name", "Rex"),
				gatewayInputKey(t, first, "favourite colour"):   accepted("color", "red"),
			}
			if u := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": answers}); u.Error != nil {
				t.Fatalf("tasks/update: %s", u.raw)
			}
			second := waitGatewayTask(t, c, id, "the second round", func(r taskRuntimeReply) bool { return asks(r, "Save the profile of Rex?") })
			answers = map[string]any{gatewayInputKey(t, second, "Save the profile"): accepted("save", false)}
			if u := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": answers}); u.Error != nil {
				t.Fatalf("tasks/update: %s", u.raw)
			}
			done := waitGatewayTask(t, c, id, "the interview to complete", statusIs("completed"))
			if !strings.Contains(done.raw, "Hello Rex, you like red; saved: false") {
				t.Errorf("interview: %s", done.raw)
			}
		}},
		{"2026-07-28 plain call", func(t *testing.T, rt *taskruntime.Server, addr string) {
			gw := startGateway(t, gatewayOptions{Upstream: addr})
			r := sendPlain(t, gw.URL, "Bearer dee", "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 2, "stepMs": 0, "label": "plain"}})
			if r.Error != nil || !strings.Contains(r.raw, "Completed 2 steps for plain") {
				t.Fatalf("plain call of the task-only tool: %s, want its result", r.raw)
			}
		}},
		{"2025-11-25 task through the reverse bridge", func(t *testing.T, rt *taskruntime.Server, addr string) {
			gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: hmacAuth})
			alice := reverseClient(t, gw, "alice")
			alice.initialize(`{"elicitation":{"form":{}}}`)
			task := alice.createTask(taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 0, "label": "bridged"}, 60000)
			final, _ := taskResult(t, alice, task.TaskID, nil)
			if got := textOf(t, final); got != "Completed 3 steps for bridged" {
				t.Errorf("steps task result: %s", final.Result)
			}
			if ids := rt.TaskIDs(taskruntime.ToolSteps); len(ids) != 1 || ids[0] == task.TaskID {
				t.Errorf("upstream steps tasks %v for gateway task %s: want one of the upstream's own", ids, task.TaskID)
			}
		}},
		{"2025-11-25 plain call through the reverse bridge", func(t *testing.T, rt *taskruntime.Server, addr string) {
			gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: hmacAuth})
			bob := reverseClient(t, gw, "bob")
			bob.initialize(`{}`)
			steps := bob.call("tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 2, "stepMs": 0, "label": "rev"}})
			if got := textOf(t, steps); got != "Completed 2 steps for rev" {
				t.Errorf("steps: %q", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := runtimeLike
			opts.BindHeader = "-" // the reverse bridge's JWT callers are told apart by the gateway
			rt, url := startTaskRuntimeInProcess(t, opts)
			tt.run(t, rt, strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"))
			if n := rt.Rejections(taskruntime.CodeHeaderMismatch); n != 0 {
				t.Errorf("the fixture refused %d requests for their headers", n)
			}
		})
	}
}
