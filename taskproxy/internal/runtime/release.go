package runtime

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Releasing leases. A lease that this process gives up while it lives (at a
// clean stop, or for a recovered task its route never gave a request to
// run from) is released rather than left to run out, so that another
// replica's takeover pass, or the next start's recovery, takes the task at
// once. A release is Acquire with a zero ttl: the same guarded write as a
// renewal, so it lands only while the lease is this process's (or free,
// or expired), and leaves the lease expired at now. A lease another
// worker took meanwhile stays as it is.

// releaseLease gives up this process's lease of the owner's task id. A
// task that ended (ErrTerminal), or whose lease another worker holds
// (ErrLeaseHeld), is left alone.
func (rt *Runtime) releaseLease(ctx context.Context, owner, id string) error {
	_, err := rt.Store.Acquire(ctx, owner, id, rt.Store.Holder(), Now(), 0)
	return err
}

// leftBehind returns the tasks (id to owner) whose lease this process holds
// for its work on them: those its workers run and the recovered ones that
// wait to resume. Taken before the shutdown, whose cancellation ends both.
func (rt *Runtime) leftBehind() map[string]string {
	out := map[string]string{}
	for id, run := range rt.workers.snapshot() {
		out[id] = run.owner
	}
	rt.resuming.Range(func(k, v any) bool {
		out[k.(string)] = v.(*resumingTask).owner
		return true
	})
	return out
}

// releaseLeftBehind releases, at a clean stop, the leases of the tasks in
// left (leftBehind) whose work in this process has ended. A worker still
// running keeps its lease until it runs out: its call may yet record an
// outcome, and no other worker may run the task meanwhile.
func (rt *Runtime) releaseLeftBehind(left map[string]string) {
	if len(left) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	released := 0
	for id, owner := range left {
		if _, running := rt.workers.get(id); running {
			continue
		}
		if rt.releaseLease(ctx, owner, id) == nil {
			released++
			// Through the relay, before it closes: the other replicas'
			// takeover passes run now, not a lease renewal period later.
			rt.Hub.Publish(ctx, task.TaskEvent{TaskID: id, Kind: task.EventReleased})
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			break // the rest run out as a dead replica's do
		}
	}
	if route := rt.routes.inCharge(); route != nil && released > 0 {
		route.log.Info("released the leases of tasks left to another worker", zap.Int("tasks", released))
	}
}
