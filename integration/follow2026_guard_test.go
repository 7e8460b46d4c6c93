package integration

import (
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestFollowV2026GuardedInput: a 2026-07-28 client declaring the tasks
// extension calls the fixture's guarded tool, which answers input_required
// before making any task. The gateway makes it its task in
// input_required; the client answers each round with tasks/update, the
// gateway sends the call again with the answers, and once the upstream
// makes its task the gateway follows it to its result (it does not take
// the upstream's CreateTaskResult for the result).
func TestFollowV2026GuardedInput(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10s")
	c := newTaskRuntimeClient(gw.URL, "Bearer gus")
	id := c.mustCreate(t, taskruntime.ToolGuarded, map[string]any{"steps": 2, "stepMs": 0})
	for _, round := range []struct {
		question string
		answer   map[string]any
	}{
		{"Run the guarded job?", accepted("confirm", true)},
		{"Why run the guarded job?", accepted("reason", "audit")},
	} {
		asked := waitGatewayTask(t, c, id, round.question, func(r taskRuntimeReply) bool {
			return r.Result["status"] == "input_required" && asks(r, round.question)
		})
		key := gatewayInputKey(t, asked, round.question)
		if r := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: round.answer}}); r.Error != nil {
			t.Fatalf("tasks/update (%s): %s", round.question, r.raw)
		}
	}
	done := waitGatewayTask(t, c, id, "the guarded task to end", func(r taskRuntimeReply) bool {
		return r.Result["status"] == "completed" || r.Result["status"] == "failed"
	})
	if !strings.Contains(done.raw, "Guarded job for audit: 2 steps") {
		t.Errorf("the guarded task: %s, want the upstream task's result", done.raw)
	}
	if calls, tasks := rt.Calls(taskruntime.ToolGuarded), rt.TasksCreated(taskruntime.ToolGuarded); calls != 3 || tasks != 1 {
		t.Errorf("the runtime saw %d calls and made %d tasks, want 3 and 1", calls, tasks)
	}
}
