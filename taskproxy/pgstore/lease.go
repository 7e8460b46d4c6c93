package pgstore

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Leases. A lease is a row (task id, holder, expiry) beside the task. Taking
// or renewing one is a single guarded upsert: it lands when the lease is
// free, expired at now, or already the holder's, so of replicas racing for
// an expired lease exactly one wins. The store knows no holder to be gone
// before its lease expires (Badger's earlier-epoch rule has no equivalent
// across replicas): a takeover waits for the expiry.

// leases takes and renews the lease rows of tasks.
type leases struct {
	*database
}

// Acquire takes or renews the lease of the owner's task; see
// task.Store.
func (s *leases) Acquire(ctx context.Context, owner, id, holder string, now time.Time, ttl time.Duration) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	expires := now.Add(ttl)
	var record []byte
	var err error
	for range maxRetries {
		err = s.pool.QueryRow(ctx, s.q.acquire, id, ownerHash(owner), holder, expires.UnixNano(), now.UnixNano()).Scan(&record)
		if !retryable(err) {
			break
		}
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, s.refusedLease(ctx, owner, id)
	case err != nil:
		return nil, s.fail("taking the lease of task "+id, err)
	}
	t, err := decodeTask(record, &holder, new(expires.UnixNano()))
	if err != nil {
		return nil, s.fail("taking the lease of task "+id, err)
	}
	return t, nil
}

// refusedLease explains an Acquire that took nothing.
func (s *leases) refusedLease(ctx context.Context, owner, id string) error {
	var taskOwner []byte
	var status string
	err := s.pool.QueryRow(ctx, s.q.acquireState, id).Scan(&taskOwner, &status)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return task.ErrNotFound
	case err != nil:
		return s.fail("reading task "+id, err)
	case !bytes.Equal(taskOwner, ownerHash(owner)):
		return task.ErrForeign
	case task.Status(status).Terminal():
		return task.ErrTerminal
	}
	return task.ErrLeaseHeld
}
