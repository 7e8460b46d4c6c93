package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestReverseBridgeReplicaKill: a 2025-11-25 client through a balancer in
// front of two replicas on PostgreSQL, in front of the 2026-07-28-only
// task runtime fixture. Its session (opened by the reverse bridge on one
// replica, bound in the shared store) serves it on both; its task follows
// the fixture's, and when the replica following it is killed with SIGKILL
// the other takes it over and re-attaches to the upstream's task by its
// recorded id (not re-run), and tasks/result answers the upstream's result.
func TestReverseBridgeReplicaKill(t *testing.T) {
	t.Parallel()
	rt, c := taskRuntimeReplicas(t, "trust_domain reverse-e2e\nrate_limit 1000\n")

	rt.Hold(taskruntime.ToolSteps, 2)
	alice := c.v2025(t, "alice")
	if !strings.HasPrefix(alice.session, "mcp-tasks-v2026.") {
		t.Fatalf("session %q is not the reverse bridge's", alice.session)
	}
	created := alice.createTask(taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 0, "label": "replicas"}, 600000)
	waitFor(t, time.Minute, "the held step through the balancer", func() bool {
		return alice.getTask(created.TaskID).StatusMessage == "step 2 of 3"
	})
	victim := c.runningOn(created.TaskID)
	if victim < 0 {
		t.Fatal("no replica follows the task")
	}
	ids := rt.TaskIDs(taskruntime.ToolSteps)
	if len(ids) != 1 {
		t.Fatalf("upstream steps tasks: %v, want one", ids)
	}
	c.kill(victim)
	if err := rt.Release(ids[0]); err != nil { // the upstream's work goes on without any replica
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "the survivor to take the task over and see it complete", func() bool {
		return alice.getTask(created.TaskID).Status != "working"
	})
	final, _ := taskResult(t, alice, created.TaskID, nil)
	if got := textOf(t, final); got != "Completed 3 steps for replicas" {
		t.Errorf("after the kill: %q, want the upstream's result", got)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 1 {
		t.Errorf("upstream steps tasks: %d, want 1 (re-attached, not re-run)", n)
	}
	if logs := c.nodes[1-victim].logs(); !strings.Contains(logs, created.TaskID) {
		t.Errorf("the surviving replica's log never names task %s", created.TaskID)
	}
}
