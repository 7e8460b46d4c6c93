package runtime

import (
	"context"
	"errors"
	"testing"
)

// A run whose task ended while its worker still reads the upstream's
// CreateTaskResult counts for its owner until the worker leaves the table;
// with none, the count is had without a walk of the workers.
func TestEndedStillUpstreamCount(t *testing.T) {
	t.Parallel()
	rt, _ := testRoute(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	run := &Run{Ctx: ctx, Cancel: cancel, owner: "o", quota: "o"}
	run.create.counted = &rt.workers.ended
	rt.workers.add("t1", run)
	idle := &Run{owner: "o", quota: "o"}
	idle.create.counted = &rt.workers.ended
	rt.workers.add("t2", idle)
	if n := rt.EndedStillUpstream("o"); n != 0 || rt.workers.ended.Load() != 0 {
		t.Fatalf("before any ending: %d (table %d), want 0", n, rt.workers.ended.Load())
	}
	run.awaitCreate()
	if !run.holdStop(errors.New("cancelled")) || !run.holdStop(errors.New("again")) {
		t.Fatal("the stop of a run reading its CreateTaskResult was not held")
	}
	if idle.holdStop(errors.New("cancelled")) {
		t.Fatal("the stop of a run that reads nothing was held")
	}
	if n, other := rt.EndedStillUpstream("o"), rt.EndedStillUpstream("p"); n != 1 || other != 0 || rt.workers.ended.Load() != 1 {
		t.Fatalf("after one ending: owner %d, another %d, table %d; want 1, 0, 1", n, other, rt.workers.ended.Load())
	}
	rt.workers.remove("t2", idle)
	rt.workers.remove("t1", run)
	if n := rt.EndedStillUpstream("o"); n != 0 || rt.workers.ended.Load() != 0 {
		t.Fatalf("after the workers left: %d (table %d), want 0", n, rt.workers.ended.Load())
	}
}
