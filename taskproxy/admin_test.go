package taskproxy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The operator's access to a runtime: nothing before the store opens
// (ErrNotReady), health that follows the store and recovery, a refusal for
// terminal tasks, and an operator cancellation that ends the task as its
// owner's would.
func TestRuntimeOperatorAccess(t *testing.T) {
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
	waitForAdmin(t, "recovery to finish", func() bool { return rt.Health(ctx).Healthy() })

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

func waitForAdmin(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
