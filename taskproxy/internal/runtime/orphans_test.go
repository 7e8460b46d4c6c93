package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A task leased to this process with no worker and its lease run out is
// failed by the orphan pass; one with a worker or a live lease is not.
func TestOrphanPass(t *testing.T) {
	t.Parallel()
	rt, route := testRoute(t)
	ctx := context.Background()
	now := Now()
	mk := func(holder string, expires time.Time) *task.Task {
		tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Era: task.Era2025,
			Lease: task.Lease{Holder: holder, Expires: expires}}
		if err := rt.Store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		return tk
	}
	me := rt.Store.Holder()
	orphan := mk(me, now.Add(-time.Second))
	fresh := mk(me, now.Add(time.Minute))
	running := mk(me, now.Add(-time.Second))
	rt.workers.add(running.ID, &Run{owner: "o"})
	defer rt.workers.remove(running.ID, nil)
	other := mk("another-process", now.Add(-time.Second))

	if n := route.FailOrphans(ctx, now); n != 1 {
		t.Errorf("failed %d tasks, want 1", n)
	}
	for _, tc := range []struct {
		tk   *task.Task
		want task.Status
	}{{orphan, task.StatusFailed}, {fresh, task.StatusWorking}, {running, task.StatusWorking}, {other, task.StatusWorking}} {
		rec, err := rt.Store.Get(ctx, "o", tc.tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != tc.want {
			t.Errorf("task leased to %q until %s: %s, want %s", tc.tk.Lease.Holder, tc.tk.Lease.Expires, rec.Status, tc.want)
		}
		if tc.want == task.StatusFailed && (rec.Error == nil || rec.Error.Message != MsgWorkerLost) {
			t.Errorf("orphan error = %+v", rec.Error)
		}
	}
}
