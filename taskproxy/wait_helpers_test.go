package taskproxy

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// waitFor polls cond until it holds; a condition that never comes fails
// the test after a generous deadline rather than hanging it.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waitStoreStatus waits for owner's task id in store to have a status
// that ok accepts, and returns the record.
func waitStoreStatus(t testing.TB, store task.Store, owner, id string, ok func(task.Status) bool) *task.Task {
	t.Helper()
	var rec *task.Task
	var err error
	waitFor(t, "task "+id+"'s status", func() bool {
		rec, err = store.Get(context.Background(), owner, id)
		return err == nil && ok(rec.Status)
	})
	return rec
}

// waitEnded waits for a task of the gateway's store to end.
func waitEnded(t testing.TB, g *Gateway, owner, id string) *task.Task { //nolint:unparam // a task is found by owner and id; the call says whose
	t.Helper()
	return waitStoreStatus(t, g.rt.Store, owner, id, task.Status.Terminal)
}

// waitStatus waits for a task of the gateway's store to reach want.
func waitStatus(t testing.TB, g *Gateway, owner, id string, want task.Status) *task.Task { //nolint:unparam // a task is found by owner and id; the call says whose
	t.Helper()
	return waitStoreStatus(t, g.rt.Store, owner, id, func(s task.Status) bool { return s == want })
}
