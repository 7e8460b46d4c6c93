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

// Leases, with the clock injected through Acquire's now. The holders are
// names no backend takes for gone, so only expiry frees a lease here.

const holderA, holderB = "storetest/holder-a", "storetest/holder-b"

func testLeases(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	tk.Lease = task.Lease{Holder: holderA, Expires: t0.Add(30 * time.Second)}
	mustCreate(t, s, tk)
	if got := mustGet(t, s, "alice", tk.ID); got.Lease.Holder != holderA || !got.Lease.Expires.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("the lease given at create reads back as %+v", got.Lease)
	}
	free := newTask("alice", t0) // created without a lease
	mustCreate(t, s, free)
	steps := []struct {
		name   string
		id     string
		holder string
		at     time.Duration
		want   error
	}{
		{"a free lease is taken", free.ID, holderB, 0, nil},
		{"the holder renews", tk.ID, holderA, 10 * time.Second, nil},
		{"another holder before expiry", tk.ID, holderB, 35 * time.Second, task.ErrLeaseHeld},
		{"the holder renews again", tk.ID, holderA, 20 * time.Second, nil},
		{"another holder just before the renewed expiry", tk.ID, holderB, 50*time.Second - time.Millisecond, task.ErrLeaseHeld},
		{"another holder at the renewed expiry", tk.ID, holderB, 50 * time.Second, nil},
		{"the first holder has lost it", tk.ID, holderA, 55 * time.Second, task.ErrLeaseHeld},
		{"the new holder renews", tk.ID, holderB, 60 * time.Second, nil},
		{"an expired lease is taken long after", tk.ID, holderA, time.Hour, nil},
	}
	for _, st := range steps {
		got, err := s.Acquire(ctx, "alice", st.id, st.holder, t0.Add(st.at), 30*time.Second)
		if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.want)
		}
		want := task.Lease{Holder: st.holder, Expires: t0.Add(st.at + 30*time.Second)}
		if err == nil && (got == nil || got.ID != st.id || got.Lease.Holder != want.Holder || !got.Lease.Expires.Equal(want.Expires)) {
			t.Errorf("%s: Acquire returned %+v, want lease %+v", st.name, got, want)
		}
		if err == nil {
			if stored := mustGet(t, s, "alice", st.id); stored.Lease.Holder != want.Holder || !stored.Lease.Expires.Equal(want.Expires) {
				t.Errorf("%s: stored lease %+v, want %+v", st.name, stored.Lease, want)
			}
		}
	}
	errs := []struct {
		name  string
		owner string
		id    string
		want  error
	}{
		{"unknown task", "alice", task.NewTaskID(), task.ErrNotFound},
		{"another owner's task", "bob", tk.ID, task.ErrForeign},
	}
	for _, e := range errs {
		if _, err := s.Acquire(ctx, e.owner, e.id, holderB, t0.Add(2*time.Hour), time.Second); !errors.Is(err, e.want) {
			t.Errorf("Acquire of %s: err = %v, want %v", e.name, err, e.want)
		}
	}
	// The end of a task drops its lease, and a terminal task has none to take.
	if _, err := s.Update(ctx, "alice", tk.ID, setStatus(task.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "alice", tk.ID); got.Lease != (task.Lease{}) {
		t.Errorf("a terminal task keeps its lease %+v", got.Lease)
	}
	for _, h := range []string{holderA, holderB} {
		if _, err := s.Acquire(ctx, "alice", tk.ID, h, t0.Add(2*time.Hour), time.Second); !errors.Is(err, task.ErrTerminal) {
			t.Errorf("Acquire of a terminal task by %s: err = %v, want ErrTerminal", h, err)
		}
	}
}

// An update that does not touch the lease keeps it, renewals included.
func testLeaseKeptByUpdate(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	tk.Lease = task.Lease{Holder: holderA, Expires: t0.Add(30 * time.Second)}
	mustCreate(t, s, tk)
	for i := range 3 {
		if _, err := s.Acquire(ctx, "alice", tk.ID, holderA, t0.Add(time.Duration(i+1)*10*time.Second), 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	want := t0.Add(60 * time.Second)
	out, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.StatusMessage = "half way"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if out.Lease.Holder != holderA || !out.Lease.Expires.Equal(want) {
		t.Errorf("Update returned lease %+v, want %s until %s", out.Lease, holderA, want)
	}
	got := mustGet(t, s, "alice", tk.ID)
	if got.Lease.Holder != holderA || !got.Lease.Expires.Equal(want) || got.StatusMessage != "half way" {
		t.Errorf("after an update: lease %+v, message %q", got.Lease, got.StatusMessage)
	}
	active, _, err := s.ListActive(ctx, "", 10)
	if err != nil || len(active) != 1 || active[0].Lease.Holder != holderA || !active[0].Lease.Expires.Equal(want) {
		t.Errorf("ListActive shows %+v, %v", active, err)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderB, want.Add(-time.Second), time.Minute); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("the renewed lease did not hold after an update: %v", err)
	}
}

// An update may set, move or clear the lease itself; what it wrote is what
// a later read and Acquire see.
func testLeaseSetByUpdate(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	mustCreate(t, s, tk)
	steps := []struct {
		name  string
		lease task.Lease
	}{
		{"set on a task without one", task.Lease{Holder: holderA, Expires: t0.Add(time.Minute)}},
		{"moved to another holder", task.Lease{Holder: holderB, Expires: t0.Add(2 * time.Minute)}},
		{"cleared", task.Lease{}},
		{"set again", task.Lease{Holder: holderA, Expires: t0.Add(3 * time.Minute)}},
	}
	for _, st := range steps {
		out, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.Lease = st.lease; return nil })
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := mustGet(t, s, "alice", tk.ID)
		for what, l := range map[string]task.Lease{"returned": out.Lease, "stored": got.Lease} {
			if l.Holder != st.lease.Holder || !l.Expires.Equal(st.lease.Expires) {
				t.Errorf("%s: %s lease %+v, want %+v", st.name, what, l, st.lease)
			}
		}
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderB, t0.Add(2*time.Minute), time.Minute); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("a lease set by an update did not hold: %v", err)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderB, t0.Add(3*time.Minute), time.Minute); err != nil {
		t.Errorf("a lease set by an update did not expire: %v", err)
	}
}

// Of concurrent claims on a free or expired lease exactly one wins.
func testLeaseConcurrentClaims(t *testing.T, s task.Store) {
	ctx := context.Background()
	expired := newTask("alice", t0)
	expired.Lease = task.Lease{Holder: "storetest/crashed", Expires: t0.Add(-time.Second)}
	free := newTask("alice", t0)
	mustCreate(t, s, expired, free)
	for _, tk := range []*task.Task{expired, free} {
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				holder := fmt.Sprintf("storetest/claimer-%d", i)
				_, err := s.Acquire(ctx, "alice", tk.ID, holder, t0, time.Minute)
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(holder)
				case !errors.Is(err, task.ErrLeaseHeld):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d claims won, want exactly 1", wins.Load())
		}
		if got := mustGet(t, s, "alice", tk.ID); got.Lease.Holder != winner.Load().(string) {
			t.Errorf("stored holder %s, the winner was %s", got.Lease.Holder, winner.Load())
		}
	}
}

// A renewal racing the end of the task never leaves a lease on a terminal
// task: either it came first and the end dropped it, or it sees ErrTerminal.
func testLeaseVersusTerminal(t *testing.T, s task.Store) {
	ctx := context.Background()
	for range 60 {
		tk := newTask("alice", t0)
		tk.Lease = task.Lease{Holder: holderA, Expires: t0.Add(time.Minute)}
		mustCreate(t, s, tk)
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := s.Acquire(ctx, "alice", tk.ID, holderA, t0.Add(time.Second), time.Minute); err != nil && !errors.Is(err, task.ErrTerminal) {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := s.Update(ctx, "alice", tk.ID, setStatus(task.StatusCancelled)); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if got := mustGet(t, s, "alice", tk.ID); got.Status != task.StatusCancelled || got.Lease != (task.Lease{}) {
			t.Fatalf("after the race: %s with lease %+v", got.Status, got.Lease)
		}
	}
}

// Holder names this process, the same every time.
func testHolder(t *testing.T, s task.Store) {
	h := s.Holder()
	if h == "" || s.Holder() != h {
		t.Errorf("Holder() = %q then %q", h, s.Holder())
	}
}
