package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestUpstreamTaskV2025EndedBeforeCreateResult: a 2025-11-25 task-aware
// upstream (the task runtime in its 2025-11-25 mode, which serves
// params.task as the TypeScript SDK's server does) holds the
// CreateTaskResult of the gateway's creating call while its task runs. A
// 2025-11-25 client's task of it is cancelled, or stopped by its
// run_timeout, meanwhile. The client sees it ended at once; under
// max_active_per_principal 1 a second create is refused while the
// upstream's task may still run; once the answer comes, the gateway sends
// tasks/cancel for the task it names (no notifications/cancelled, which
// the spec forbids for tasks and which would not stop it), and creates are
// taken again.
func TestUpstreamTaskV2025EndedBeforeCreateResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, directives, want string
		end                    func(t *testing.T, c *rpcClient, id string)
	}{{
		name: "cancel", directives: "max_active_per_principal 1", want: "cancelled",
		end: func(t *testing.T, c *rpcClient, id string) {
			if m := c.call("tasks/cancel", map[string]string{"taskId": id}); m.Error != nil {
				t.Fatalf("tasks/cancel: %d %s", m.Error.Code, m.Error.Message)
			}
		},
	}, {
		name: "run_timeout", directives: "max_active_per_principal 1\nrun_timeout 1s", want: "failed",
		end: func(*testing.T, *rpcClient, string) {},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{V2025Tasks: true, PollInterval: 20 * time.Millisecond})
			gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"), Directives: tc.directives})
			rt.HoldAnswers(taskruntime.ToolSteps)
			c := newRPCClient(t, gw.URL)
			c.initialize("")
			id := c.createTask(taskruntime.ToolSteps, longSteps(), 600_000).TaskID
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ids, err := rt.WaitTaskIDs(ctx, taskruntime.ToolSteps, 1)
			if err != nil {
				t.Fatal(err)
			}
			tc.end(t, c, id)
			waitFor(t, 60*time.Second, "the gateway task to end "+tc.want, func() bool { return c.getTask(id).Status == tc.want })

			// The caller's slot stays taken while the upstream's task may run.
			stepsBefore := rt.TasksCreated(taskruntime.ToolSteps)
			if m := c.callTool(taskruntime.ToolSteps, longSteps(), map[string]any{"ttl": 600_000}); m.Error == nil || m.Error.Code != -32000 {
				t.Fatalf("a create while the upstream task may run: %s %+v, want -32000 (max_active_per_principal 1)", m.Result, m.Error)
			}
			if n := rt.TasksCreated(taskruntime.ToolSteps); n != stepsBefore {
				t.Fatalf("upstream steps tasks created: %d, want %d (the create refused before the upstream)", n, stepsBefore)
			}
			if n := rt.Requests("notifications/cancelled"); n != 0 {
				t.Errorf("the upstream got %d notifications/cancelled for a task-augmented call", n)
			}

			rt.ReleaseAnswers(taskruntime.ToolSteps)
			waitUpstreamCancelled(t, rt, ids[0])
			waitFor(t, 60*time.Second, "a create taken once the held upstream task is cancelled", func() bool {
				return c.callTool(taskruntime.ToolSteps, map[string]any{"steps": 1, "stepMs": 0}, map[string]any{"ttl": 60_000}).Error == nil
			})
		})
	}
}
