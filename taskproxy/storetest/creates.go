package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Creates with an idempotency key, and creates within a quota.

func keyed(owner, key, fingerprint string) *task.Task {
	tk := newTask(owner, time.Now())
	tk.IdempotencyKey, tk.Fingerprint = key, fingerprint
	return tk
}

func testIdempotency(t *testing.T, s task.Store) {
	ctx := context.Background()
	first := keyed("alice", "key", "args-1")
	mustCreate(t, s, first)
	tests := []struct {
		name    string
		tk      *task.Task
		dupOf   string // a *DuplicateError naming this task
		wantErr error  // else this error (nil: created)
	}{
		{"same key, same arguments", keyed("alice", "key", "args-1"), first.ID, nil},
		{"same key, other arguments", keyed("alice", "key", "args-2"), "", task.ErrIdempotencyMismatch},
		{"same key, other principal", keyed("bob", "key", "args-1"), "", nil},
		{"other key", keyed("alice", "key-2", "args-1"), "", nil},
		{"no key", keyed("alice", "", ""), "", nil},
		{"no key again", keyed("alice", "", ""), "", nil},
	}
	for _, tt := range tests {
		err := s.Create(ctx, tt.tk)
		var dup *task.DuplicateError
		switch {
		case tt.dupOf != "":
			if !errors.As(err, &dup) || dup.TaskID != tt.dupOf {
				t.Errorf("%s: err = %v, want a duplicate of %s", tt.name, err, tt.dupOf)
			}
		case tt.wantErr == nil && err != nil, !errors.Is(err, tt.wantErr):
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
		}
		if err != nil {
			if _, gerr := s.Get(ctx, tt.tk.Owner, tt.tk.ID); !isPlainNotFound(gerr) {
				t.Errorf("%s: the refused task was stored (%v)", tt.name, gerr)
			}
		}
	}
	// The key stays taken when its task has ended: a retry learns the
	// outcome instead of running the call again.
	if _, err := s.Update(ctx, "alice", first.ID, setStatus(task.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	var dup *task.DuplicateError
	if err := s.Create(ctx, keyed("alice", "key", "args-1")); !errors.As(err, &dup) || dup.TaskID != first.ID {
		t.Errorf("after the task ended: err = %v, want a duplicate of %s", err, first.ID)
	}
	// A duplicate within a quota is not counted as a new task.
	if n, _ := s.CountActive(ctx, "alice"); n != 3 {
		t.Errorf("CountActive(alice) = %d, want 3", n)
	}
}

// Of concurrent creates with one key exactly one stores a task; the others
// are duplicates of it (same arguments) or mismatches (other arguments).
func testIdempotencyConcurrent(t *testing.T, s task.Store) {
	ctx := context.Background()
	for _, mixed := range []bool{false, true} {
		owner := "carol"
		if mixed {
			owner = "dave"
		}
		var created atomic.Int32
		var winner atomic.Value
		var mu sync.Mutex
		var dupOf []string
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				fp := "same"
				if mixed && i%2 == 1 {
					fp = "other"
				}
				tk := keyed(owner, "burst", fp)
				err := s.Create(ctx, tk)
				var dup *task.DuplicateError
				switch {
				case err == nil:
					created.Add(1)
					winner.Store(tk.ID)
				case errors.As(err, &dup):
					mu.Lock()
					dupOf = append(dupOf, dup.TaskID)
					mu.Unlock()
				case mixed && errors.Is(err, task.ErrIdempotencyMismatch):
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if created.Load() != 1 {
			t.Fatalf("mixed=%v: %d of 12 concurrent creates with one key stored a task, want 1", mixed, created.Load())
		}
		for _, id := range dupOf {
			if id != winner.Load().(string) {
				t.Errorf("mixed=%v: a duplicate names %s, the stored task is %s", mixed, id, winner.Load())
			}
		}
		if n, _ := s.CountActive(ctx, owner); n != 1 {
			t.Errorf("mixed=%v: %d active tasks, want 1", mixed, n)
		}
	}
}

// The sweep frees the key of the task it deletes.
func testIdempotencyFreedBySweep(t *testing.T, s task.Store) {
	ctx := context.Background()
	old := newTask("alice", t0)
	old.IdempotencyKey, old.Fingerprint = "k", "f"
	mustCreate(t, s, old)
	if n, err := s.Sweep(ctx, t0.Add(2*time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	again := newTask("alice", t0.Add(2*time.Hour))
	again.IdempotencyKey, again.Fingerprint = "k", "other"
	if err := s.Create(ctx, again); err != nil {
		t.Errorf("the key of a swept task is not free: %v", err)
	}
}

// Concurrent creates at a quota: exactly the quota succeeds, the rest are
// refused with a *QuotaError naming the limit.
func testQuotaConcurrent(t *testing.T, s task.Store) {
	ctx := context.Background()
	tests := []struct {
		owner          string
		limit, callers int
	}{
		{"q-3-of-30", 3, 30},
		{"q-1-of-40", 1, 40},
		{"q-10-of-60", 10, 60},
	}
	var outer sync.WaitGroup
	for _, tt := range tests {
		// The owners run at once too: quotas are per owner.
		outer.Go(func() {
			var ok, refused atomic.Int32
			var wg sync.WaitGroup
			for range tt.callers {
				wg.Go(func() {
					err := s.CreateWithin(ctx, newTask(tt.owner, time.Now()), tt.limit)
					var q *task.QuotaError
					switch {
					case err == nil:
						ok.Add(1)
					case errors.As(err, &q) && errors.Is(err, task.ErrQuotaExceeded) && q.Limit == tt.limit:
						refused.Add(1)
					default:
						t.Errorf("%s: unexpected error %v", tt.owner, err)
					}
				})
			}
			wg.Wait()
			if int(ok.Load()) != tt.limit || int(refused.Load()) != tt.callers-tt.limit {
				t.Errorf("%s: %d created, %d refused; want %d and %d", tt.owner, ok.Load(), refused.Load(), tt.limit, tt.callers-tt.limit)
			}
			if n, _ := s.CountActive(ctx, tt.owner); n != tt.limit {
				t.Errorf("%s: %d active, want %d", tt.owner, n, tt.limit)
			}
		})
	}
	outer.Wait()
}

// Terminal tasks do not count, a task created terminal is never refused, a
// task ending frees room, and maxActive <= 0 means no limit.
func testQuotaActiveOnly(t *testing.T, s task.Store) {
	ctx := context.Background()
	a, b := newTask("alice", t0), newTask("alice", t0)
	for _, tk := range []*task.Task{a, b} {
		if err := s.CreateWithin(ctx, tk, 2); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name  string
		tk    func() *task.Task
		limit int
		want  error
	}{
		{"created terminal at the quota", func() *task.Task {
			ended := newTask("alice", t0)
			ended.Status = task.StatusCompleted
			return ended
		}, 2, nil},
		{"third active", func() *task.Task { return newTask("alice", t0) }, 2, task.ErrQuotaExceeded},
		{"input_required counts", func() *task.Task {
			tk := newTask("alice", t0)
			tk.Status = task.StatusInputRequired
			return tk
		}, 2, task.ErrQuotaExceeded},
		{"no limit", func() *task.Task { return newTask("alice", t0) }, 0, nil},
		{"negative: no limit", func() *task.Task { return newTask("alice", t0) }, -1, nil},
		{"over the quota now", func() *task.Task { return newTask("alice", t0) }, 4, task.ErrQuotaExceeded},
	}
	for _, st := range steps {
		if err := s.CreateWithin(ctx, st.tk(), st.limit); !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", st.name, err, st.want)
		}
	}
	for _, id := range []string{a.ID, b.ID} {
		if _, err := s.Update(ctx, "alice", id, setStatus(task.StatusCancelled)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := s.CreateWithin(ctx, newTask("alice", t0), 4); err != nil {
			t.Errorf("after two tasks ended, create %d: %v", i+1, err)
		}
	}
	if err := s.CreateWithin(ctx, newTask("alice", t0), 4); !errors.Is(err, task.ErrQuotaExceeded) {
		t.Errorf("at the quota again: %v", err)
	}
}

// A repeat of a create (same owner and idempotency key) is answered with
// its task even when the owner is at the quota: it would add no task. A
// reused key with other arguments is still a mismatch, and a new key is
// refused by the quota.
func testIdempotentRepeatAtQuota(t *testing.T, s task.Store) {
	ctx := context.Background()
	first := keyed("alice", "key", "args-1")
	if err := s.CreateWithin(ctx, first, 1); err != nil {
		t.Fatal(err)
	}
	var dup *task.DuplicateError
	if err := s.CreateWithin(ctx, keyed("alice", "key", "args-1"), 1); !errors.As(err, &dup) || dup.TaskID != first.ID {
		t.Errorf("repeat at the quota: err = %v, want a duplicate of %s", err, first.ID)
	}
	if err := s.CreateWithin(ctx, keyed("alice", "key", "args-2"), 1); !errors.Is(err, task.ErrIdempotencyMismatch) {
		t.Errorf("reused key at the quota: err = %v, want ErrIdempotencyMismatch", err)
	}
	if err := s.CreateWithin(ctx, keyed("alice", "key-2", "args-1"), 1); !errors.Is(err, task.ErrQuotaExceeded) {
		t.Errorf("new key at the quota: err = %v, want ErrQuotaExceeded", err)
	}
}
