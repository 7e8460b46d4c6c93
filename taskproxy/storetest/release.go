package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// An Acquire with a zero ttl releases the holder's lease (the runtime's
// release at a clean stop): another holder takes it at once, long before
// the lease would have expired; a release by a holder that lost the lease
// changes nothing.
func testLeaseRelease(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	tk.Lease = task.Lease{Holder: holderA, Expires: t0.Add(time.Hour)}
	mustCreate(t, s, tk)
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderB, t0.Add(time.Second), 30*time.Second); !errors.Is(err, task.ErrLeaseHeld) {
		t.Fatalf("another holder before the release: err = %v, want ErrLeaseHeld", err)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderA, t0.Add(2*time.Second), 0); err != nil {
		t.Fatalf("the release: %v", err)
	}
	if got := mustGet(t, s, "alice", tk.ID).Lease; got.Expires.After(t0.Add(2 * time.Second)) {
		t.Errorf("the released lease reads back as %+v, want expired at the release", got)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderB, t0.Add(3*time.Second), 30*time.Second); err != nil {
		t.Fatalf("another holder after the release: %v", err)
	}
	if _, err := s.Acquire(ctx, "alice", tk.ID, holderA, t0.Add(4*time.Second), 0); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("a release by the holder that lost the lease: err = %v, want ErrLeaseHeld", err)
	}
	if got := mustGet(t, s, "alice", tk.ID).Lease; got.Holder != holderB || !got.Expires.Equal(t0.Add(33*time.Second)) {
		t.Errorf("the new holder's lease reads back as %+v", got)
	}
}
