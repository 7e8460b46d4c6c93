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
	rt, c := taskRuntimeReplicas(t, "trust_domain reverse-e2e\nrate_limit 1000\nlease 10s\n") // a takeover in seconds, not the default lease's 30

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

// TestReverseBridgeSessionAcrossReplicas: what a 2025-11-25 client's
// initialize declared (here the elicitation capability) is kept with its
// reverse-bridge session in the shared store, so the session needs no
// stickiness: a session opened on one replica calls, through the other,
// the 2026-07-28 runtime's guarded tool, which needs the elicitation
// capability (-32021 without it), and its task asks for the guard's input
// instead of failing. Through the round-robin balancer, of two calls in a
// row one goes to the replica that did not see the initialize.
func TestReverseBridgeSessionAcrossReplicas(t *testing.T) {
	t.Parallel()
	_, c := taskRuntimeReplicas(t, "trust_domain reverse-e2e\nrate_limit 1000\n")
	args := map[string]any{"steps": 1, "stepMs": 0}
	settled := func(rc *rpcClient, id string) string {
		var status string
		waitFor(t, time.Minute, "the guarded task to leave working", func() bool {
			status = rc.getTask(id).Status
			return status != "working"
		})
		return status
	}

	alice := newRPCClient(t, c.nodes[0].URL)
	alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	alice.initialize(`{"elicitation":{"form":{}}}`)
	if !strings.HasPrefix(alice.session, "mcp-tasks-v2026.") {
		t.Fatalf("session %q is not the reverse bridge's", alice.session)
	}
	alice.url = c.nodes[1].URL
	created := alice.createTask(taskruntime.ToolGuarded, args, 60000)
	if got := settled(alice, created.TaskID); got != "input_required" {
		t.Errorf("a session opened on replica 0 calling the guarded tool through replica 1: task %s, want input_required", got)
	}

	bob := c.v2025(t, "bob")
	var ids []string
	for range 2 {
		ids = append(ids, bob.createTask(taskruntime.ToolGuarded, args, 60000).TaskID)
	}
	for i, id := range ids {
		if got := settled(bob, id); got != "input_required" {
			t.Errorf("call %d of a session through the balancer: task %s, want input_required", i+1, got)
		}
	}
}
