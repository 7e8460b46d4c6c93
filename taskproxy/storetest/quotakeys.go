package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Quota keys: the tasks of one owner counted apart per key (the gateway's
// anonymous callers, per client address), while the tasks stay the
// owner's.

// quotaTask returns a task of owner counted under quota ("" for the owner).
func quotaTask(owner, quota string, created time.Time) *task.Task {
	tk := newTask(owner, created)
	tk.QuotaKey = quota
	return tk
}

// Both bounds count per quota key: a key at a bound refuses its own
// creates only; tasks without a key count under their owner as before;
// the tasks stay the owner's to read and list; a task that ends moves from
// its key's active count to its finished one.
func testQuotaKeys(t *testing.T, s task.Store) {
	ctx := context.Background()
	limits := task.Limits{MaxActive: 2, MaxFinished: 2}
	const anon = task.Anonymous
	var ids []string
	create := func(quota string, d time.Duration, status task.Status) (*task.Task, error) {
		tk := quotaTask(anon, quota, t0.Add(d))
		if status != "" {
			tk.Status = status
		}
		err := s.CreateWithinLimits(ctx, tk, limits)
		if err == nil {
			ids = append(ids, tk.ID)
		}
		return tk, err
	}
	isActiveQuota := func(err error) bool {
		var q *task.QuotaError
		return errors.As(err, &q) && errors.Is(err, task.ErrQuotaExceeded) && !q.Finished && q.Limit == 2
	}
	ok := func(err error) bool { return err == nil }
	// ip:a fills its active bound.
	a1, _ := create("ip:a", 0, "")
	if _, err := create("ip:a", time.Millisecond, ""); err != nil {
		t.Fatalf("ip:a's second task: %v", err)
	}
	steps := []struct {
		name   string
		quota  string
		status task.Status
		check  func(error) bool
	}{
		{"ip:a over its active bound", "ip:a", "", isActiveQuota},
		{"ip:b beside it", "ip:b", "", ok},
		{"the owner without a key beside it", "", "", ok},
		{"ip:b at one of two", "ip:b", "", ok},
		{"ip:b over its active bound", "ip:b", "", isActiveQuota},
		{"ip:a created terminal: not bounded by active", "ip:a", task.StatusCompleted, ok},
	}
	for i, st := range steps {
		if _, err := create(st.quota, time.Duration(i+2)*time.Millisecond, st.status); !st.check(err) {
			t.Errorf("%s: err = %v", st.name, err)
		}
	}
	for _, c := range []struct {
		quota string
		want  int
	}{{"ip:a", 2}, {"ip:b", 2}, {anon, 1}, {"ip:c", 0}} {
		if n, err := s.CountActive(ctx, c.quota); err != nil || n != c.want {
			t.Errorf("CountActive(%s) = %d, %v; want %d", c.quota, n, err, c.want)
		}
	}
	// The tasks are the owner's: read and listed by it, by no key.
	got := mustGet(t, s, anon, a1.ID)
	if got.QuotaKey != "ip:a" || got.Owner != anon {
		t.Errorf("read back owner %q quota key %q, want %q and ip:a", got.Owner, got.QuotaKey, anon)
	}
	if _, err := s.Get(ctx, "ip:a", a1.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("Get by the quota key: %v, want ErrNotFound", err)
	}
	listed, _, err := s.List(ctx, anon, "", 100)
	if err != nil || len(listed) != len(ids) {
		t.Errorf("List(%s) = %d tasks, %v; want %d", anon, len(listed), err, len(ids))
	}
	// Ending a task of ip:a frees one active place of ip:a's, and takes
	// one finished place of ip:a's: at two finished, ip:a is refused, and
	// ip:b is not.
	if _, err := s.Update(ctx, anon, a1.ID, setStatus(task.StatusFailed)); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountActive(ctx, "ip:a"); n != 1 {
		t.Errorf("after one of ip:a's tasks ended: CountActive(ip:a) = %d, want 1", n)
	}
	if _, err := create("ip:a", time.Second, ""); !isFinishedQuota(2)(err) {
		t.Errorf("ip:a with two finished: err = %v, want the finished bound", err)
	}
	if _, err := create("ip:b", time.Second, task.StatusCompleted); err != nil {
		t.Errorf("ip:b with none finished: %v", err)
	}
	if _, err := create("", time.Second, task.StatusCompleted); err != nil {
		t.Errorf("the owner without a key, none finished: %v", err)
	}
}

// Concurrent creates of one owner under several keys, at both bounds:
// each key gets exactly its bound, whatever batches or groups the store
// forms, and the owner's tasks without a key are bounded on their own.
func testQuotaKeysConcurrent(t *testing.T, s task.Store) {
	ctx := context.Background()
	const perKey, limit = 20, 3
	tests := []struct {
		name     string
		terminal bool
		limits   task.Limits
		refused  func(error) bool
	}{
		{"active", false, task.Limits{MaxActive: limit}, func(err error) bool {
			var q *task.QuotaError
			return errors.As(err, &q) && !q.Finished && q.Limit == limit
		}},
		{"finished", true, task.Limits{MaxFinished: limit}, isFinishedQuota(limit)},
	}
	for _, tt := range tests {
		owner := "shared-" + tt.name
		keys := []string{"ip:10.0.0.1", "ip:10.0.0.2", "ip:10.0.0.3", ""}
		created := make([]atomic.Int32, len(keys))
		var wg sync.WaitGroup
		for k, key := range keys {
			for range perKey {
				wg.Go(func() {
					tk := quotaTask(owner, key, time.Now())
					if tt.terminal {
						tk.Status = task.StatusCompleted
					}
					switch err := s.CreateWithinLimits(ctx, tk, tt.limits); {
					case err == nil:
						created[k].Add(1)
					case !tt.refused(err):
						t.Errorf("%s, key %q: unexpected error %v", tt.name, key, err)
					}
				})
			}
		}
		wg.Wait()
		for k, key := range keys {
			if n := created[k].Load(); n != limit {
				t.Errorf("%s, key %q: %d of %d concurrent creates stored, want %d", tt.name, key, n, perKey, limit)
			}
		}
		listed, _, err := s.List(ctx, owner, "", 100)
		if err != nil || len(listed) != limit*len(keys) {
			t.Errorf("%s: the owner lists %d tasks, %v; want %d", tt.name, len(listed), err, limit*len(keys))
		}
	}
}

// The sweep and an operator's delete take a task out of its key's counts:
// the index entries a task has under its key go with it.
func testQuotaKeysSweptAndDeleted(t *testing.T, s task.Store) {
	ctx := context.Background()
	limits := task.Limits{MaxActive: 1, MaxFinished: 1}
	working, done := quotaTask("anon", "ip:s", t0), quotaTask("anon", "ip:s", t0)
	done.Status = task.StatusCompleted
	for _, tk := range []*task.Task{working, done} {
		if err := s.CreateWithinLimits(ctx, tk, limits); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Sweep(ctx, t0.Add(2*time.Hour), 10); err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2", n, err)
	}
	if n, _ := s.CountActive(ctx, "ip:s"); n != 0 {
		t.Errorf("after the sweep: CountActive(ip:s) = %d, want 0", n)
	}
	// Created at t0 and counted at t0: a finished-index entry the sweep
	// left behind would still count.
	for i, status := range []task.Status{task.StatusWorking, task.StatusCompleted} {
		tk := quotaTask("anon", "ip:s", t0.Add(time.Duration(i)))
		tk.Status = status
		if err := s.CreateWithinLimits(ctx, tk, limits); err != nil {
			t.Errorf("after the sweep, a %s task: %v", status, err)
		}
	}
	d, ok := s.(task.Deleter)
	if !ok {
		t.Fatalf("%T does not implement task.Deleter", s)
	}
	ended := quotaTask("anon", "ip:d", t0)
	ended.Status = task.StatusFailed
	if err := s.CreateWithinLimits(ctx, ended, limits); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "anon", ended.ID) // a backend may cache a finished record on a read
	if err := s.CreateWithinLimits(ctx, quotaTask("anon", "ip:d", t0), limits); !isFinishedQuota(1)(err) {
		t.Fatalf("at ip:d's finished bound: %v", err)
	}
	if _, err := d.DeleteFinished(ctx, ended.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWithinLimits(ctx, quotaTask("anon", "ip:d", t0.Add(time.Second)), limits); err != nil {
		t.Errorf("after the delete: %v", err)
	}
}

// Idempotency keys stay the owner's: concurrent creates of one owner with
// one key under several quota keys (anonymous callers of several
// addresses, bounded) store one task, and every other is its duplicate.
func testQuotaKeysIdempotency(t *testing.T, s task.Store) {
	ctx := context.Background()
	var created atomic.Int32
	var mu sync.Mutex
	var stored string
	var dupOf []string
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			tk := quotaTask("anon", fmt.Sprintf("ip:10.0.1.%d", i%4), time.Now())
			tk.IdempotencyKey, tk.Fingerprint = "same", "args"
			err := s.CreateWithinLimits(ctx, tk, task.Limits{MaxActive: 10, MaxFinished: 10})
			var dup *task.DuplicateError
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created.Add(1)
				stored = tk.ID
			case errors.As(err, &dup):
				dupOf = append(dupOf, dup.TaskID)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 || len(dupOf) != 15 {
		t.Fatalf("%d stored and %d duplicates of 16 concurrent creates with one key, want 1 and 15", created.Load(), len(dupOf))
	}
	for _, id := range dupOf {
		if id != stored {
			t.Errorf("a duplicate names %s, the stored task is %s", id, stored)
		}
	}
}
