package badgerstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// createLeased creates alice's task at t0 holding this store's lease for
// 30 s, as the gateway creates a task.
func createLeased(t *testing.T, s *Store, t0 time.Time) *task.Task {
	t.Helper()
	tk := testTask("alice", t0)
	tk.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(30 * time.Second)}
	if err := s.Create(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// Leases with an injected clock: renewal, takeover only after expiry, a
// holder of an earlier opening of the store taken over at once, and exactly
// one winner among concurrent claims.
func TestLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	tk := createLeased(t, s, t0)
	other := "e999999/p1" // a holder of a later epoch: never taken for gone
	steps := []struct {
		name   string
		holder string
		at     time.Duration
		want   error
	}{
		{"owner renews", s.Holder(), 10 * time.Second, nil},
		{"another holder before expiry", other, 35 * time.Second, task.ErrLeaseHeld},
		{"owner renews again", s.Holder(), 20 * time.Second, nil},
		{"another holder right at the renewed expiry", other, 50 * time.Second, nil},
		{"the first holder has lost it", s.Holder(), 55 * time.Second, task.ErrLeaseHeld},
		{"the new holder renews", other, 60 * time.Second, nil},
	}
	for _, st := range steps {
		got, err := s.Acquire(ctx, "alice", tk.ID, st.holder, t0.Add(st.at), 30*time.Second)
		if !errors.Is(err, st.want) {
			t.Fatalf("%s: err = %v, want %v", st.name, err, st.want)
		}
		if err == nil && (got.Lease.Holder != st.holder || !got.Lease.Expires.Equal(t0.Add(st.at+30*time.Second))) {
			t.Errorf("%s: lease = %+v", st.name, got.Lease)
		}
	}
	if _, err := s.Acquire(ctx, "bob", tk.ID, other, t0, time.Second); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("foreign acquire: %v", err)
	}
	if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.Status = task.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Get(ctx, "alice", tk.ID)
	if got.Lease != (task.Lease{}) {
		t.Errorf("terminal task keeps its lease %+v", got.Lease)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, other, t0.Add(time.Hour), time.Second); !errors.Is(err, task.ErrTerminal) {
		t.Errorf("acquire of a terminal task: %v", err)
	}
}

func TestLeaseOfEarlierEpochIsFree(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	first, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tk := testTask("alice", now)
	tk.Lease = task.Lease{Holder: first.Holder(), Expires: now.Add(time.Hour)}
	if err := first.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	_ = first.Close() // as a crash would leave it: a live-looking lease
	second, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if second.Holder() == first.Holder() {
		t.Fatalf("both openings are %s", first.Holder())
	}
	if _, err := second.Acquire(ctx, "alice", tk.ID, second.Holder(), now, time.Minute); err != nil {
		t.Errorf("the lease of a previous opening was not free: %v", err)
	}
}

func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	now := time.Now()
	tk := testTask("alice", now)
	tk.Lease = task.Lease{Holder: "e999999/p0", Expires: now.Add(-time.Second)} // expired
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			holder := "e999999/p" + string(rune('a'+i))
			_, err := s.Acquire(ctx, "alice", tk.ID, holder, now, time.Minute)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, task.ErrLeaseHeld):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d claims won, want exactly 1", wins.Load())
	}
}

func TestListActive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	want := map[string]bool{}
	for i := range 7 {
		owner := []string{"a", "b", "c"}[i%3]
		tk := testTask(owner, time.Now())
		if i == 3 {
			tk.Status = task.StatusCompleted
		} else {
			want[tk.ID] = true
		}
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	cursor := ""
	for {
		page, next, err := s.ListActive(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page {
			if got[tk.ID] {
				t.Fatalf("%s listed twice", tk.ID)
			}
			got[tk.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Errorf("listed %d active tasks, want %d", len(got), len(want))
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s not listed", id)
		}
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	now := time.Now()
	old := testTask("alice", now.Add(-2*time.Hour)) // ttl 1h: expired
	old.IdempotencyKey, old.Fingerprint = "k", "f"
	fresh := testTask("alice", now)
	for _, tk := range []*task.Task{old, fresh} {
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Sweep(ctx, now, 1)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1 deleted", n, err)
	}
	if _, err := s.Get(ctx, "alice", old.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("owner's lookup of a swept task: %v, want task.ErrExpired", err)
	}
	if _, err := s.Get(ctx, "bob", old.ID); !errors.Is(err, task.ErrNotFound) || errors.Is(err, task.ErrExpired) {
		t.Errorf("non-owner's lookup of a swept task: %v, want plain task.ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "alice", fresh.ID); err != nil {
		t.Errorf("fresh task swept: %v", err)
	}
	if n, _ := s.CountActive(ctx, "alice"); n != 1 {
		t.Errorf("active index not swept: %d", n)
	}
	page, _, _ := s.List(ctx, "alice", "", 10)
	if len(page) != 1 {
		t.Errorf("owner index not swept: %d listed", len(page))
	}
	again := testTask("alice", now)
	again.IdempotencyKey, again.Fingerprint = "k", "other"
	if err := s.Create(ctx, again); err != nil {
		t.Errorf("the idempotency key of a swept task is not free: %v", err)
	}
	if n, err := s.Sweep(ctx, now, 10); err != nil || n != 0 {
		t.Errorf("second sweep = %d, %v", n, err)
	}
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	first := testTask("alice", time.Now())
	first.IdempotencyKey, first.Fingerprint = "key", "args-1"
	if err := s.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		owner       string
		fingerprint string
		dupOf       string
		wantErr     error
	}{
		{"same key, same arguments", "alice", "args-1", first.ID, nil},
		{"same key, other arguments", "alice", "args-2", "", task.ErrIdempotencyMismatch},
		{"same key, other principal", "bob", "args-1", "", nil},
	}
	for _, tt := range tests {
		tk := testTask(tt.owner, time.Now())
		tk.IdempotencyKey, tk.Fingerprint = "key", tt.fingerprint
		err := s.Create(ctx, tk)
		var dup *task.DuplicateError
		switch {
		case tt.dupOf != "":
			if !errors.As(err, &dup) || dup.TaskID != tt.dupOf {
				t.Errorf("%s: err = %v, want a duplicate of %s", tt.name, err, tt.dupOf)
			}
		case !errors.Is(err, tt.wantErr):
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.wantErr)
		}
	}

	var created atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			tk := testTask("carol", time.Now())
			tk.IdempotencyKey, tk.Fingerprint = "burst", "same"
			err := s.Create(ctx, tk)
			var dup *task.DuplicateError
			switch {
			case err == nil:
				created.Add(1)
			case !errors.As(err, &dup):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Errorf("%d of 10 concurrent creates with one key stored a task, want 1", created.Load())
	}
}

// TestTombstoneLastsTheTTL checks that a swept task answers "expired" for at
// least its ttl: Badger keeps an entry's expiry in whole seconds, rounded
// down, so a tombstone of a short ttl could vanish at once.
func TestTombstoneLastsTheTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, ttl := range []time.Duration{time.Second, 1500 * time.Millisecond, 3 * time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			t.Parallel()
			s := newMemStore(t)
			tk := testTask("alice", time.Now().Add(-ttl-time.Second))
			tk.TTL = ttl
			if err := s.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
			swept := time.Now()
			if n, err := s.Sweep(ctx, swept, 10); err != nil || n != 1 {
				t.Fatalf("Sweep = %d, %v; want 1 deleted", n, err)
			}
			var expiresAt uint64
			err := s.db.View(func(txn *badger.Txn) error {
				item, err := txn.Get(tombstoneKey(tk.ID))
				if err == nil {
					expiresAt = item.ExpiresAt()
				}
				return err
			})
			if err != nil {
				t.Fatalf("reading the tombstone: %v", err)
			}
			// Badger serves the entry while the Unix second is below
			// expiresAt.
			if until := time.Unix(int64(expiresAt), 0); until.Before(swept.Add(ttl)) {
				t.Errorf("the tombstone expires at %s, %s after the sweep; want at least the ttl %s", until, until.Sub(swept), ttl)
			}
		})
	}
}
