package pgstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Locks and the group commit: a lock wait, lock order, idempotency keys of
// two groups at once.

func openWith(t *testing.T, o pgstore.Options) *pgstore.Store {
	t.Helper()
	o.DSN = dsn
	if o.MaxConns == 0 {
		o.MaxConns = 8
	}
	s, err := pgstore.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// lockOwners begins a transaction of the test's own that holds every row of
// the schema's owners table, as a long transaction elsewhere could.
func lockOwners(t *testing.T, schema string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{schema}.Sanitize()+".owners FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A group whose owner row is held by another transaction does not fail
// after the write timeout, nor hold up the creates of other owners: it is
// split after its lock timeout, the other owners' creates commit while the
// row is still held, and the held owner's create waits for it and lands.
func TestGroupLockWaitSplits(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openWith(t, pgstore.Options{Schema: schema, WriteTimeout: 5 * time.Minute})
	ctx := context.Background()
	limits := task.Limits{MaxActive: 100}
	if err := s.CreateWithinLimits(ctx, tk("alice"), limits); err != nil { // alice's owner row exists
		t.Fatal(err)
	}
	tx := lockOwners(t, schema)

	held, release := pgstore.HoldGroups(s)
	alice := tk("alice")
	aliceErr := make(chan error, 1)
	go func() { aliceErr <- s.CreateWithinLimits(ctx, alice, limits) }()
	<-held
	others := []*task.Task{tk("bob"), tk("carol"), tk("dave")}
	otherErrs := make(chan error, len(others))
	for _, o := range others {
		go func() { otherErrs <- s.CreateWithinLimits(ctx, o, limits) }()
	}
	waitFor(t, func() bool { return pgstore.QueuedCreates(s) == len(others) })
	release()
	for range others {
		if err := <-otherErrs; err != nil {
			t.Errorf("a create of another owner while alice's row is held: %v", err)
		}
	}
	select {
	case err := <-aliceErr:
		t.Fatalf("alice's create returned while her row was still held: %v", err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-aliceErr; err != nil {
		t.Errorf("alice's create once her row was free: %v", err)
	}
	for _, x := range append(others, alice) {
		if _, err := s.Get(ctx, x.Owner, x.ID); err != nil {
			t.Errorf("Get %s of %s: %v", x.ID, x.Owner, err)
		}
	}
}

// Only a create that still waits for its owner's row when the write
// deadline passes fails, and as unavailable (the gateway's 503 with
// Retry-After).
func TestGroupLockWaitPastDeadline(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openWith(t, pgstore.Options{Schema: schema, WriteTimeout: 2 * time.Second})
	ctx := context.Background()
	limits := task.Limits{MaxActive: 100}
	if err := s.CreateWithinLimits(ctx, tk("alice"), limits); err != nil {
		t.Fatal(err)
	}
	tx := lockOwners(t, schema)
	if err := s.CreateWithinLimits(ctx, tk("alice"), limits); !errors.Is(err, task.ErrUnavailable) {
		t.Errorf("a create whose owner row stays held past the deadline: %v, want ErrUnavailable", err)
	}
	if err := s.CreateWithinLimits(ctx, tk("bob"), limits); err != nil {
		t.Errorf("another owner's create meanwhile: %v", err)
	}
	_ = tx.Rollback(ctx)
	if err := s.CreateWithinLimits(ctx, tk("alice"), limits); err != nil {
		t.Errorf("alice's create once her row is free: %v", err)
	}
}

// Groups on two replicas, updates that lock task rows, and the sweep, all
// at once on the same owners and keys, never deadlock: every transaction
// takes owner rows before task rows, and a group inserts its rows in one
// order.
func TestGroupUpdateSweepNoDeadlock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a := openWith(t, pgstore.Options{Schema: schema})
	b := openWith(t, pgstore.Options{Schema: schema})
	stores := []*pgstore.Store{a, b}
	ctx := context.Background()
	owners := []string{"alice", "bob"}
	limits := task.Limits{MaxActive: 1000, MaxFinished: 1000}

	var mu sync.Mutex
	var unexpected []error
	report := func(what string, err error) {
		mu.Lock()
		defer mu.Unlock()
		unexpected = append(unexpected, fmt.Errorf("%s: %w", what, err))
	}
	done := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := a.Sweep(ctx, time.Now(), 16); err != nil {
				report("sweep", err)
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			s := stores[w%2]
			for i := range 25 {
				x := tk(owners[(w+i)%2])
				if i%3 == 0 {
					x.TTL = time.Millisecond // for the sweep, at once
				}
				if i%2 == 0 {
					x.IdempotencyKey, x.Fingerprint = fmt.Sprintf("k%d", i%5), "f"
				}
				err := s.CreateWithinLimits(ctx, x, limits)
				var dup *task.DuplicateError
				switch {
				case errors.As(err, &dup):
					x.ID = dup.TaskID
				case err != nil:
					report("create", err)
					continue
				}
				// Concurrent updates of one task: some take the locked
				// path after their compare-and-sets fail.
				var ups sync.WaitGroup
				for u := range 4 {
					ups.Go(func() {
						_, err := stores[u%2].Update(ctx, x.Owner, x.ID, func(t *task.Task) error {
							if u == 3 {
								return t.SetStatus(task.StatusCompleted, "", time.Now())
							}
							t.StatusMessage = fmt.Sprintf("step %d", u)
							return nil
						})
						if err != nil && !errors.Is(err, task.ErrNotFound) && !errors.Is(err, task.ErrTerminal) {
							report("update", err)
						}
					})
				}
				ups.Wait()
			}
		})
	}
	wg.Wait()
	close(done)
	sweeps.Wait()
	for _, err := range unexpected {
		t.Error(err)
	}
	if n := pgstore.Deadlocks(a) + pgstore.Deadlocks(b); n != 0 {
		t.Errorf("%d transactions broken as deadlocked", n)
	}
}

// Two replicas' groups creating the same idempotency keys of one owner at
// once (creates without bounds) do not deadlock, whatever order their
// creates came in: each key makes one task, and the other create of it
// answers with that task. The groups are made to meet mid-way: a
// transaction of the test holds a key in the middle until both groups wait
// (one for the key, the other for the owner's row, which every group
// locks, so that their keys never interleave; their rows are inserted in
// key order besides).
func TestGroupKeysNoDeadlock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a := openWith(t, pgstore.Options{Schema: schema, WriteTimeout: 5 * time.Minute})
	b := openWith(t, pgstore.Options{Schema: schema, WriteTimeout: 5 * time.Minute})
	ctx := context.Background()
	const keys = 24
	key := func(k int) string { return fmt.Sprintf("k%02d", k) }

	// The blocker: an uncommitted task of alice's with the middle key.
	blocker, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	if err := a.Create(ctx, tk("carol")); err != nil { // the schema exists
		t.Fatal(err)
	}
	hash := sha256.Sum256([]byte("alice"))
	if _, err := blocker.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+
		".tasks (id, owner_hash, status, created_ns, expires_ns, idem_key, fingerprint, version, record) VALUES ('blocker', $1, 'working', 0, 0, $2, 'f', 1, '{}')",
		hash[:16], key(keys/2)); err != nil {
		t.Fatal(err)
	}

	type outcome struct {
		task *task.Task
		err  error
	}
	results := map[string][]outcome{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var releases []func()
	for i, s := range []*pgstore.Store{a, b} {
		held, release := pgstore.HoldGroups(s)
		releases = append(releases, release)
		for n := range keys + 1 {
			k := n
			if i == 1 { // the other replica's creates come in the other order
				k = keys - n
			}
			x := tk("alice")
			x.IdempotencyKey, x.Fingerprint = key(k), "f"
			wg.Go(func() {
				err := s.Create(ctx, x)
				mu.Lock()
				results[x.IdempotencyKey] = append(results[x.IdempotencyKey], outcome{x, err})
				mu.Unlock()
			})
			if n == 0 {
				<-held
			} else {
				waitFor(t, func() bool { return pgstore.QueuedCreates(s) == n })
			}
		}
	}
	for _, release := range releases {
		release()
	}
	waitFor(t, func() bool { // both groups wait
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'`, pgx.Identifier{schema}.Sanitize()).Scan(&n)
		return err == nil && n == 2
	})
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for k, outs := range results {
		var created *task.Task
		for _, o := range outs {
			if o.err == nil {
				if created != nil {
					t.Errorf("key %s made two tasks", k)
				}
				created = o.task
			}
		}
		for _, o := range outs {
			var dup *task.DuplicateError
			if o.err != nil && (!errors.As(o.err, &dup) || created == nil || dup.TaskID != created.ID) {
				t.Errorf("key %s: %v (created %v)", k, o.err, created != nil)
			}
		}
	}
	if n := pgstore.Deadlocks(a) + pgstore.Deadlocks(b); n != 0 {
		t.Errorf("%d transactions broken as deadlocked", n)
	}
}

// A row another transaction takes after the group looked it up (here a
// task with the same idempotency key, inserted by a transaction that does
// not lock the owner's row, as an older build's create without a bound)
// inserts nothing: the group does not commit without it, runs again, and
// answers that create with the task that took the key.
func TestGroupRowTakenMeanwhile(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openWith(t, pgstore.Options{Schema: schema, WriteTimeout: 5 * time.Minute})
	ctx := context.Background()
	if err := s.Create(ctx, tk("carol")); err != nil { // the schema exists
		t.Fatal(err)
	}
	other, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Rollback(ctx) }()
	hash := sha256.Sum256([]byte("alice"))
	if _, err := other.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+
		".tasks (id, owner_hash, status, created_ns, expires_ns, idem_key, fingerprint, version, record) VALUES ('taken-first', $1, 'working', 0, $2, 'k', 'f', 1, '{}')",
		hash[:16], time.Now().Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	x, y := tk("alice"), tk("bob")
	x.IdempotencyKey, x.Fingerprint = "k", "f"
	xErr, yErr := make(chan error, 1), make(chan error, 1)
	held, release := pgstore.HoldGroups(s)
	go func() { xErr <- s.Create(ctx, x) }()
	<-held
	go func() { yErr <- s.Create(ctx, y) }()
	waitFor(t, func() bool { return pgstore.QueuedCreates(s) == 1 })
	release()
	waitFor(t, func() bool { // the group's insert waits for the other transaction's key
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'`, pgx.Identifier{schema}.Sanitize()).Scan(&n)
		return err == nil && n == 1
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var dup *task.DuplicateError
	if err := <-xErr; !errors.As(err, &dup) || dup.TaskID != "taken-first" {
		t.Errorf("the create whose key was taken meanwhile: %v, want a DuplicateError naming the task that took it", err)
	}
	if err := <-yErr; err != nil {
		t.Errorf("the other create of the group: %v", err)
	}
	if _, err := s.Get(ctx, "bob", y.ID); err != nil {
		t.Errorf("the other create of the group: %v", err)
	}
	if _, err := s.Get(ctx, "alice", x.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("the create whose key was taken: Get = %v, want ErrNotFound", err)
	}
}
