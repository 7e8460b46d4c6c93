package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Expiry: the sweep deletes tasks past their ttl, whatever their status,
// with everything that points at them, and leaves a tombstone that tells
// the owner (only) "expired" for one ttl more.

func testSweep(t *testing.T, s task.Store) {
	ctx := context.Background()
	now := t0.Add(24 * time.Hour)
	old := newTask("alice", now.Add(-2*time.Hour)) // ttl 1h: expired
	old.Lease = task.Lease{Holder: holderA, Expires: now.Add(time.Hour)}
	oldEnded := newTask("alice", now.Add(-3*time.Hour))
	oldEnded.Status = task.StatusCompleted
	fresh := newTask("alice", now)
	almost := newTask("alice", now.Add(-time.Hour+time.Millisecond)) // expires just after now
	mustCreate(t, s, old, oldEnded, fresh, almost)
	n, err := s.Sweep(ctx, now, 10)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 deleted", n, err)
	}
	for _, id := range []string{old.ID, oldEnded.ID} {
		if _, err := s.Get(ctx, "alice", id); !errors.Is(err, task.ErrExpired) {
			t.Errorf("the owner's lookup of a swept task: %v, want ErrExpired", err)
		}
		if _, err := s.Get(ctx, "bob", id); !isPlainNotFound(err) {
			t.Errorf("another owner's lookup of a swept task: %v, want plain ErrNotFound", err)
		}
		if _, err := s.Update(ctx, "alice", id, func(*task.Task) error { return nil }); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Update of a swept task: %v, want ErrNotFound", err)
		}
		if _, err := s.Acquire(ctx, "alice", id, holderA, now, time.Minute); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Acquire of a swept task: %v, want ErrNotFound", err)
		}
	}
	for _, tk := range []*task.Task{fresh, almost} {
		if _, err := s.Get(ctx, "alice", tk.ID); err != nil {
			t.Errorf("a task not yet expired was swept: %v", err)
		}
	}
	if n, _ := s.CountActive(ctx, "alice"); n != 2 {
		t.Errorf("CountActive after the sweep = %d, want 2", n)
	}
	if page, _, _ := s.List(ctx, "alice", "", 10); len(page) != 2 {
		t.Errorf("List after the sweep: %d tasks, want 2", len(page))
	}
	if active, _, _ := s.ListActive(ctx, "", 10); len(active) != 2 {
		t.Errorf("ListActive after the sweep: %d tasks, want 2", len(active))
	}
	if n, err := s.Sweep(ctx, now, 10); err != nil || n != 0 {
		t.Errorf("second sweep = %d, %v; want 0", n, err)
	}
	// A new task may reuse nothing of the old one but works on its own.
	if _, err := s.Acquire(ctx, "alice", fresh.ID, holderB, now, time.Minute); err != nil {
		t.Errorf("Acquire of a fresh task after the sweep: %v", err)
	}
}

// batch bounds one transaction, not the sweep: every expired task goes.
func testSweepBatches(t *testing.T, s task.Store) {
	ctx := context.Background()
	for i := range 7 {
		tk := newTask([]string{"a", "b"}[i%2], t0)
		tk.TTL = time.Duration(i+1) * time.Minute
		mustCreate(t, s, tk)
	}
	keep := newTask("a", t0)
	keep.TTL = time.Hour
	mustCreate(t, s, keep)
	if n, err := s.Sweep(ctx, t0.Add(30*time.Minute), 2); err != nil || n != 7 {
		t.Errorf("Sweep with batch 2 = %d, %v; want 7", n, err)
	}
	if n, _ := s.CountActive(ctx, "a"); n != 1 {
		t.Errorf("%d of a's tasks left, want 1", n)
	}
}

// The tombstone lasts one ttl, on the wall clock, then the id is plainly
// unknown.
func testTombstoneExpires(t *testing.T, s task.Store) {
	ctx := context.Background()
	now := time.Now()
	tk := newTask("alice", now.Add(-3*time.Second))
	tk.TTL = time.Second
	mustCreate(t, s, tk)
	if n, err := s.Sweep(ctx, now, 10); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if _, err := s.Get(ctx, "alice", tk.ID); !errors.Is(err, task.ErrExpired) {
		t.Fatalf("right after the sweep: %v, want ErrExpired", err)
	}
	waitUntil(t, "the tombstone of a task with a 1s ttl ends", func() bool {
		_, _ = s.Sweep(ctx, time.Now(), 10) // a backend may clear tombstones in the sweep
		_, err := s.Get(ctx, "alice", tk.ID)
		return isPlainNotFound(err)
	})
}
