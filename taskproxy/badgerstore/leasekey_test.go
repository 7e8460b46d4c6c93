package badgerstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// recordVersion returns the Badger version of a task's record, and of its
// lease key (0 when absent).
func recordVersion(t *testing.T, s *Store, id string) (record, lease uint64) {
	t.Helper()
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(recordKey(id))
		if err != nil {
			return err
		}
		record = item.Version()
		if item, err := txn.Get(leaseKey(id)); err == nil {
			lease = item.Version()
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return record, lease
}

// A task is created with its lease in the record and writes no lease key;
// the first renewal moves the lease to its own key, and later renewals
// write that key only: the record, with its arguments, is not rewritten.
// Updates, recovery listing, the end of the task and the sweep see and drop
// the lease wherever it lives.
func TestLeaseRenewalKeepsRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	tk := testTask("alice", t0)
	tk.Params = json.RawMessage(`{"arguments":{"blob":"` + strings.Repeat("x", 100<<10) + `"}}`)
	tk.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(30 * time.Second)}
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, lease := recordVersion(t, s, tk.ID); lease != 0 {
		t.Fatal("a created task's lease has a key of its own")
	}
	if got, err := s.Get(ctx, "alice", tk.ID); err != nil || !sameLease(got.Lease, tk.Lease) {
		t.Fatalf("created task's lease = %+v, %v; want %+v", got.Lease, err, tk.Lease)
	}
	var rec0, lease0 uint64
	for i := range 5 {
		at := t0.Add(time.Duration(i+1) * 10 * time.Second)
		got, err := s.Acquire(ctx, "alice", tk.ID, s.Holder(), at, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Lease.Expires.Equal(at.Add(30 * time.Second)) {
			t.Errorf("renewal %d: lease %+v", i, got.Lease)
		}
		if i == 0 {
			if rec0, lease0 = recordVersion(t, s, tk.ID); lease0 == 0 {
				t.Fatal("the first renewal wrote no lease key")
			}
		}
	}
	rec1, lease1 := recordVersion(t, s, tk.ID)
	if rec1 != rec0 {
		t.Errorf("lease renewals after the first rewrote the record: version %d to %d", rec0, rec1)
	}
	if lease1 == lease0 {
		t.Error("lease renewals did not write the lease key")
	}
	want := t0.Add(80 * time.Second)
	if got, err := s.Get(ctx, "alice", tk.ID); err != nil || !got.Lease.Expires.Equal(want) {
		t.Errorf("Get after renewals: lease %+v, %v; want expiry %s", got.Lease, err, want)
	}
	if active, _, err := s.ListActive(ctx, "", 10); err != nil || len(active) != 1 || !active[0].Lease.Expires.Equal(want) {
		t.Errorf("ListActive after renewals: %+v, %v", active, err)
	}
	// An update keeps the lease, and leaves it out of the record.
	if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.StatusMessage = "half way"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "alice", tk.ID); !got.Lease.Expires.Equal(want) || got.StatusMessage != "half way" {
		t.Errorf("after an update: %+v", got)
	}
	if _, lease := recordVersion(t, s, tk.ID); lease != lease1 {
		t.Error("an update that kept the lease rewrote its key")
	}
	// The end of the task drops the lease key.
	if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.Status = task.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, lease := recordVersion(t, s, tk.ID); lease != 0 {
		t.Error("a terminal task keeps its lease key")
	}
	if got, _ := s.Get(ctx, "alice", tk.ID); got.Lease != (task.Lease{}) {
		t.Errorf("terminal task's lease %+v", got.Lease)
	}

	// The sweep deletes a live task's lease key with it.
	live := testTask("alice", t0)
	live.TTL = time.Second
	live.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(time.Minute)}
	if err := s.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sweep(ctx, t0.Add(time.Hour*2), 100); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(leaseKey(live.ID))
		return err
	})
	if !errors.Is(err, badger.ErrKeyNotFound) {
		t.Errorf("the sweep left the lease key: %v", err)
	}
}

// A record written before leases had their own key keeps its embedded
// lease until the lease is next written.
func TestLeaseEmbeddedInOldRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	tk := testTask("alice", t0)
	tk.Lease = task.Lease{Holder: "e1/p1", Expires: t0.Add(time.Hour)}
	data, _ := json.Marshal(tk)
	if err := s.db.Update(func(txn *badger.Txn) error {
		return s.createIn(txn, &task.Task{ID: tk.ID, Owner: tk.Owner, CreatedAt: t0, TTL: time.Hour, Status: task.StatusWorking}, data, nil)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "alice", tk.ID)
	if err != nil || got.Lease.Holder != tk.Lease.Holder || !got.Lease.Expires.Equal(tk.Lease.Expires) {
		t.Fatalf("old record's lease = %+v, %v", got.Lease, err)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, "e999/p2", t0, time.Minute); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("the embedded lease was not honoured: %v", err)
	}
}

// A task that ends before its lease is renewed never writes a lease key:
// the lease lives in the record, an update keeps it there, and the end of
// the task drops it with the record's rewrite. Another holder is refused
// while the lease in the record holds.
func TestLeaseInRecordUntilRenewed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	t0 := time.Unix(1_800_000_000, 0)
	tk := createLeased(t, s, t0)
	if _, err := s.Acquire(ctx, "alice", tk.ID, "e999/p2", t0.Add(time.Second), time.Minute); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("another holder took a lease kept in the record: %v", err)
	}
	got, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.StatusMessage = "half way"; return nil })
	if err != nil || !sameLease(got.Lease, tk.Lease) {
		t.Fatalf("update: lease %+v, %v; want %+v", got.Lease, err, tk.Lease)
	}
	if got, err := s.Get(ctx, "alice", tk.ID); err != nil || !sameLease(got.Lease, tk.Lease) || got.StatusMessage != "half way" {
		t.Errorf("after an update: %+v, %v", got, err)
	}
	if active, _, err := s.ListActive(ctx, "", 10); err != nil || len(active) != 1 || !sameLease(active[0].Lease, tk.Lease) {
		t.Errorf("ListActive: %+v, %v", active, err)
	}
	if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.Status = task.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, lease := recordVersion(t, s, tk.ID); lease != 0 {
		t.Error("a task that was never renewed wrote a lease key")
	}
	if got, err := s.Get(ctx, "alice", tk.ID); err != nil || got.Lease != (task.Lease{}) {
		t.Errorf("terminal task: lease %+v, %v", got.Lease, err)
	}
}
