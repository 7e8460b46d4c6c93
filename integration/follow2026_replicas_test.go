package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestFollowV2026ReplicaKill: two replicas on PostgreSQL behind a balancer,
// in front of the task runtime fixture. The replica that follows an
// upstream task is killed with SIGKILL; the other takes the task over once
// the lease runs out and re-attaches to the upstream's task by its recorded
// id (the upstream's work goes on meanwhile, and is not started again), and
// the task completes with the upstream's result.
func TestFollowV2026ReplicaKill(t *testing.T) {
	t.Parallel()
	rt, c := taskRuntimeReplicas(t, "trust_domain follow2026-e2e\ntask_after 10s\nrate_limit 1000\nlease 10s\n") // a takeover in seconds, not the default lease's 30

	rt.Hold(taskruntime.ToolSteps, 2)
	client := newTaskRuntimeClient(c.URL, "Bearer "+hmacToken(t, "erin", "t1"))
	id := client.mustCreate(t, taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 0, "label": "replicas"})
	waitGatewayTask(t, client, id, "the held step through the balancer", func(r taskRuntimeReply) bool {
		return r.Result["statusMessage"] == "step 2 of 3"
	})
	victim := c.runningOn(id)
	if victim < 0 {
		t.Fatal("no replica follows the task")
	}
	ids := rt.TaskIDs(taskruntime.ToolSteps)
	if len(ids) != 1 {
		t.Fatalf("upstream steps tasks: %v, want one", ids)
	}
	c.kill(victim)
	// The upstream's work goes on without any replica.
	if err := rt.Release(ids[0]); err != nil {
		t.Fatal(err)
	}
	var last taskRuntimeReply
	waitFor(t, 3*time.Minute, "the survivor to take the task over and see it complete", func() bool {
		last = client.get(t, id)
		return last.Result["status"] != "working"
	})
	if last.Result["status"] != "completed" || !strings.Contains(last.raw, "Completed 3 steps for replicas") {
		t.Errorf("after the kill: %s, want the upstream's result", last.raw)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 1 {
		t.Errorf("upstream steps tasks: %d, want 1 (re-attached, not re-run)", n)
	}
	if logs := c.nodes[1-victim].logs(); !strings.Contains(logs, id) {
		t.Errorf("the surviving replica's log never names task %s", id)
	}
}

// taskRuntimeReplicas starts the task runtime fixture and two replicas on
// one PostgreSQL in front of it (hmacAuth, then directives) behind a
// balancer. The fixture binds its tasks to nothing: after a takeover the
// survivor follows a task without the creator's credentials, which the
// gateway never stores.
func taskRuntimeReplicas(t *testing.T, directives string) (*taskruntime.Server, *replicaCluster) {
	t.Helper()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond, BindHeader: "-"})
	upAddr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	dsn, _ := testDatabase(t)
	c := &replicaCluster{t: t, created: map[string]string{}}
	c.start(2, upAddr, dsn, hmacAuth+directives)
	return rt, c
}
