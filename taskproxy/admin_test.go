package taskproxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The operator's access to a runtime: nothing before the store opens
// (ErrNotReady), health that follows the store and recovery, a refusal for
// terminal tasks, and an operator cancellation that ends the task as its
// owner's would.
func TestRuntimeOperatorAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newMemStore(t)
	rt := NewLazyRuntime(func() (task.Store, error) { return store, nil })
	t.Cleanup(func() { _ = rt.Close(time.Second) })

	if h := rt.Health(ctx); h.Open || h.Reachable || h.Healthy() || h.Error == "" {
		t.Errorf("health before start = %+v, want not open with a reason", h)
	}
	if _, _, err := rt.ListAll(ctx, task.TaskFilter{}, "", 10); !errors.Is(err, task.ErrNotReady) {
		t.Errorf("ListAll before start: %v, want ErrNotReady", err)
	}
	if _, err := rt.CancelAsOperator(ctx, task.NewTaskID(), "test"); !errors.Is(err, task.ErrNotReady) {
		t.Errorf("CancelAsOperator before start: %v, want ErrNotReady", err)
	}

	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	mustStart(t, g)
	waitFor(t, "recovery to finish", func() bool { return rt.Health(ctx).Healthy() })

	working := testTask("o:alice", time.Now())
	done := testTask("o:bob", time.Now())
	done.Status = task.StatusCompleted
	for _, tk := range []*task.Task{working, done} {
		if err := store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.CancelAsOperator(ctx, done.ID, "test"); !errors.Is(err, task.ErrTerminal) {
		t.Errorf("cancelling a completed task: %v, want ErrTerminal", err)
	}
	if _, err := rt.CancelAsOperator(ctx, task.NewTaskID(), "test"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("cancelling an unknown task: %v, want ErrNotFound", err)
	}
	got, err := rt.CancelAsOperator(ctx, working.ID, "test")
	if err != nil || got.Status != task.StatusCancelled {
		t.Fatalf("CancelAsOperator = %+v, %v", got, err)
	}
	if owner, err := store.Get(ctx, "o:alice", working.ID); err != nil || owner.Status != task.StatusCancelled {
		t.Errorf("the owner sees %+v, %v", owner, err)
	}

	_ = rt.Close(time.Second)
	if h := rt.Health(ctx); h.Reachable || h.Healthy() {
		t.Errorf("health after close = %+v, want unreachable", h)
	}
}

// An operator's delete of a finished task: nothing before the store opens,
// a running task refused, and a finished one gone for its owner, from the
// store and from the cache of tasks/get answers that polling it filled.
func TestRuntimeOperatorDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newMemStore(t)
	rt := NewLazyRuntime(func() (task.Store, error) { return store, nil })
	t.Cleanup(func() { _ = rt.Close(time.Second) })
	if _, err := rt.DeleteAsOperator(ctx, task.NewTaskID(), "test"); !errors.Is(err, task.ErrNotReady) {
		t.Errorf("DeleteAsOperator before start: %v, want ErrNotReady", err)
	}
	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	mustStart(t, g)

	now := time.Now()
	working, done := testTask("o:alice", now), testTask("o:alice", now)
	// Leased to this process, as a running task's is: the recovery pass
	// after the start, which may run after the create, leaves it alone
	// (else it fails it as left by a dead process).
	working.Lease = task.Lease{Holder: store.Holder(), Expires: now.Add(time.Hour)}
	done.Status = task.StatusCompleted
	for _, tk := range []*task.Task{working, done} {
		if err := store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rt.View(done, runtime.WireV2026, now); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := rt.CachedView("o:alice", []byte(done.ID), runtime.WireV2026, now); !ok {
		t.Fatal("the finished task's view was not cached")
	}
	if got, err := rt.DeleteAsOperator(ctx, working.ID, "test"); !errors.Is(err, task.ErrNotFinished) || got == nil || got.ID != working.ID {
		t.Errorf("deleting a working task = %+v, %v; want it with ErrNotFinished", got, err)
	}
	if _, err := rt.DeleteAsOperator(ctx, task.NewTaskID(), "test"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("deleting an unknown task: %v, want ErrNotFound", err)
	}
	got, err := rt.DeleteAsOperator(ctx, done.ID, "test")
	if err != nil || got.ID != done.ID {
		t.Fatalf("DeleteAsOperator = %+v, %v", got, err)
	}
	if _, _, ok := rt.CachedView("o:alice", []byte(done.ID), runtime.WireV2026, now); ok {
		t.Error("the deleted task's view is still served from the cache")
	}
	if _, err := store.Get(ctx, "o:alice", done.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("the owner's Get of the deleted task: %v, want ErrExpired", err)
	}
}
