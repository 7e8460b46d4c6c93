package badgerstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Edge cases of the committer's live cache and of where a lease lives.
// Each test states what the store should do.

// holdCommitter blocks the committer on a write of its own until the
// returned function is called, so that the writes queued meanwhile are
// committed together, in the order queued, as one batch.
func holdCommitter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered, gate := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.write(func(*badger.Txn) (error, error) {
			close(entered)
			<-gate
			return nil, nil
		})
	}()
	<-entered
	return func() { close(gate) }
}

// queued waits until n writes wait for the committer.
func queued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.writes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", len(s.writes), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// The cache keeps small records only (maxLiveRecordLen). An update that
// makes a record too big drops it from the cache, but a renewal of a lease
// already under its own key, in the same batch, puts it back: stage() trusts "cached" (s.live) although
// the batch's own staging already said the task leaves the cache, and a
// renewal passes size 0 ("kept only if already cached, so known to be
// small"). The record stays cached, big, for as long as only renewals
// follow.
func TestLiveCacheKeepsNoBigRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	tk := testTask("alice", t0)
	tk.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(30 * time.Second)}
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	// A first renewal moves the lease to its own key; the task stays cached.
	if _, err := s.Acquire(ctx, "alice", tk.ID, s.Holder(), t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	release := holdCommitter(t, s)
	errs := make(chan error, 2)
	go func() {
		_, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error {
			rec.StatusMessage = strings.Repeat("m", 2*maxLiveRecordLen)
			return nil
		})
		errs <- err
	}()
	queued(t, s, 1)
	go func() {
		_, err := s.Acquire(ctx, "alice", tk.ID, s.Holder(), t0.Add(time.Second), time.Minute)
		errs <- err
	}()
	queued(t, s, 2)
	release()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// A write returned: the committer's settle happened before.
	if e, ok := s.live[tk.ID]; ok {
		data, err := s.encodeRecord(e.tk, e.leaseInRecord)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > maxLiveRecordLen {
			t.Errorf("the cache holds a record of %d bytes, over its bound of %d", len(data), maxLiveRecordLen)
		}
	}
}

// The Task a caller handed to Create is its own afterwards, as it was when
// every update read the record back from Badger: the cache must not share
// its Headers map (Task.Clone copies the struct, not the map), or a change
// the caller makes to its copy, never written, reaches the store with the
// next update, and a caller writing the map while the committer encodes
// the record is a concurrent map access.
func TestLiveCacheOwnsItsTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	tk := testTask("alice", t0)
	tk.Headers = map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	tk.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(30 * time.Second)}
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	tk.Headers["X-Never-Stored"] = "1" // the caller's copy only
	out, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.StatusMessage = "one"; return nil })
	if err != nil {
		t.Fatal(err)
	}
	out.Headers["X-Nor-This"] = "1" // the caller's copy of the update's result
	if _, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.StatusMessage = "two"; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "alice", tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Headers) != 1 {
		t.Errorf("stored headers %v: a caller's own copy leaked into the store through the cache", got.Headers)
	}
}

// A record written before this build may carry a lease in the record AND
// under its lease key: a build of 52d886e..62d46a9 renewing a task created
// with the lease in its record (by a build before 52d886e, or by this build
// before a downgrade) writes the lease key only and leaves the record's
// lease as it was; those builds let the key win. readRecord stopped at the
// record's stale lease and never read the key; it now skips the key only
// for a lease of this opening of the store, which only this process wrote.
func TestLeaseKeyWinsOverRecordLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	s.epoch, s.holder = 3, "e3/p300" // the third opening: epochs 1 and 2 wrote the task
	t0 := time.Unix(1_800_000_000, 0)
	tk := testTask("alice", t0)
	stale := task.Lease{Holder: "e1/p100", Expires: t0.Add(30 * time.Second)}
	renewed := task.Lease{Holder: "e2/p200", Expires: t0.Add(10 * time.Minute)}
	tk.Lease = stale
	data, err := s.encodeRecord(tk, true)
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		if err := s.createIn(txn, tk, data, nil); err != nil {
			return err
		}
		return setLease(txn, tk.ID, renewed) // the older build's renewal
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "alice", tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameLease(got.Lease, renewed) {
		t.Errorf("lease = %+v, want the renewed one under its key %+v", got.Lease, renewed)
	}
	// An update goes on from the key's lease (and writes the record without
	// the stale one); the end of the task drops the key.
	up, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.StatusMessage = "on"; return nil })
	if err != nil || !sameLease(up.Lease, renewed) {
		t.Fatalf("update: lease %+v, %v; want %+v", up.Lease, err, renewed)
	}
	if _, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.Status = task.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, lease := recordVersion(t, s, tk.ID); lease != 0 {
		t.Error("the ended task kept its lease key")
	}
	// A task created by this opening, lease in its record, is read without
	// a lookup of its key and as it was written.
	fresh := testTask("alice", t0)
	fresh.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(time.Minute)}
	if err := s.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, "alice", fresh.ID); err != nil || !sameLease(got.Lease, fresh.Lease) {
		t.Errorf("fresh task: lease %+v, %v; want %+v", got.Lease, err, fresh.Lease)
	}
}
