package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// run_timeout, end to end: a tool the upstream accepts and never answers
// (slow_compute asked to work for an hour) fails at its limit, with a
// message naming it, instead of running until the task's ttl; the
// upstream's call is cancelled (the go-sdk fixture sees its handler's
// context end), on either protocol version, and a task the upstream runs
// itself is cancelled there with tasks/cancel.

// runTimeoutMessage is the message of a task stopped by its run_timeout.
func runTimeoutMessage(limit string) string {
	return "run timeout: the tool ran longer than " + limit + " (run_timeout)"
}

func TestRunTimeout(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	// The route's limit for slow_echo, the tool's own for slow_compute;
	// the ttl (an hour) is far away.
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: `
tool slow_compute optional run_timeout 1s
tool slow_echo optional
run_timeout 2s
task_after 200ms
default_ttl 1h
`})
	hour := map[string]any{"seconds": 3600, "label": "never"}
	tests := []struct {
		name, tool, limit string
		v2025             bool
	}{
		{"2025-11-25, the tool's limit", "slow_compute", "1s", true},
		{"2026-07-28, the tool's limit", "slow_compute", "1s", false},
		{"2025-11-25, the route's limit", "slow_echo", "2s", true},
		{"2026-07-28, the route's limit", "slow_echo", "2s", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.Cancellations(tt.tool)
			var status, message string
			if tt.v2025 {
				c := newRPCClient(t, gw.URL)
				c.initialize("")
				task := c.createTask(tt.tool, hour, 3600000)
				waitFor(t, 30*time.Second, "the task to end", func() bool {
					got := c.getTask(task.TaskID)
					status, message = got.Status, got.StatusMessage
					return status != "working"
				})
			} else {
				c := newV2026Client(t, gw.URL, true)
				res := c.ok("tools/call", map[string]any{"name": tt.tool, "arguments": hour})
				if str(res["resultType"]) != "task" {
					t.Fatalf("tools/call answered %v, want a task", res)
				}
				var got map[string]json.RawMessage
				waitFor(t, 30*time.Second, "the task to end", func() bool {
					got = c.get(str(res["taskId"]))
					return str(got["status"]) != "working"
				})
				status, message = str(got["status"]), str(got["statusMessage"])
				var e jsonrpc.Error
				if err := json.Unmarshal(got["error"], &e); err != nil || e.Message != runTimeoutMessage(tt.limit) {
					t.Errorf("error %s, want the run timeout's", got["error"])
				}
			}
			if status != "failed" || message != runTimeoutMessage(tt.limit) {
				t.Errorf("task ended %s %q, want failed %q", status, message, runTimeoutMessage(tt.limit))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := up.WaitCancellations(ctx, tt.tool, before+1); err != nil {
				t.Errorf("the upstream's call was not cancelled: %v", err)
			}
		})
	}
}

// A task the upstream runs itself (the task runtime fixture, holding its
// steps task so that it never ends) is cancelled there with tasks/cancel
// when the gateway's task reaches its run_timeout.
func TestRunTimeoutFollowedTask(t *testing.T) {
	t.Parallel()
	rt, _, gw := taskRuntimeGateway(t, "", "task_after 10s\ntool steps optional run_timeout 1s")
	rt.Hold(taskruntime.ToolSteps, 1)
	c := newTaskRuntimeClient(gw.URL, "Bearer alice")
	id := c.mustCreate(t, taskruntime.ToolSteps, map[string]any{"steps": 4, "stepMs": 0, "label": "held"})
	upID := followedUpstreamID(t, gw, id)
	got := waitGatewayTask(t, c, id, "the task to end", func(r taskRuntimeReply) bool { return r.Result["status"] != "working" })
	if got.Result["status"] != "failed" || got.Result["statusMessage"] != runTimeoutMessage("1s") {
		t.Errorf("gateway task ended %v %q, want failed %q", got.Result["status"], got.Result["statusMessage"], runTimeoutMessage("1s"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := rt.WaitTask(ctx, upID, func(v taskruntime.TaskView) bool { return v.Status.Terminal() })
	if err != nil || v.Status != taskruntime.StatusCancelled {
		t.Errorf("upstream task ended %s (%v), want cancelled", v.Status, err)
	}
}
