package pgstore

import (
	"context"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// sweeper deletes what expired: tasks (leaving tombstones), tombstones and
// session bindings.
type sweeper struct {
	*database
}

// Sweep deletes the tasks whose ttl ended by now, batch by batch, leaving a
// tombstone for each; it also clears tombstones and session bindings past
// their own expiry, and the owners table's rows of quotas with no task
// left (sweepOwners). Rows locked by a concurrent write are skipped, so two
// sweepers (or a sweep and a write) never wait on each other: what is
// skipped goes in a later sweep.
func (s *sweeper) Sweep(ctx context.Context, now time.Time, batch int) (int, error) {
	if s.closed.Load() {
		return 0, task.ErrClosed
	}
	if batch <= 0 {
		batch = 1
	}
	s.finished.sweptUntil(now) // what this sweep may delete
	total := 0
	for {
		var n int
		if err := s.pool.QueryRow(ctx, s.q.sweep, now.UnixNano(), batch, time.Now().UnixNano()).Scan(&n); err != nil {
			return total, s.fail("sweeping expired tasks", err)
		}
		total += n
		if n < batch || ctx.Err() != nil {
			break
		}
	}
	wall := time.Now().UnixNano()
	for _, q := range []string{s.q.sweepTombstones, s.q.sweepSessions} {
		for {
			tag, err := s.pool.Exec(ctx, q, wall, batch)
			if err != nil {
				return total, s.fail("sweeping expired tombstones and sessions", err)
			}
			if tag.RowsAffected() < int64(batch) || ctx.Err() != nil {
				break
			}
		}
	}
	if err := s.sweepOwners(ctx, batch); err != nil {
		return total, err
	}
	return total, ctx.Err()
}

// sweepOwners deletes the owners table's rows of quotas that have no task
// left, batch by batch in hash order. A row is a quota's lock (and the
// ceiling of its finished tasks, ceiling.go), written by its first create
// and, without this, kept for ever: one per principal, and one per
// anonymous client address that ever made a task. A row a create holds is
// skipped (SKIP LOCKED), so the sweep never waits for a create; a create
// that comes while the sweep holds a row waits for it, finds the row gone
// and inserts it again (INSERT ... ON CONFLICT retries once the row it
// conflicted with is deleted), so it still counts its quota's tasks under
// the lock. A row whose create committed a task after the sweep's
// snapshot may go too (the check of its tasks reads that snapshot): the
// next create inserts it again, without a ceiling, and counts.
func (s *sweeper) sweepOwners(ctx context.Context, batch int) error {
	after := []byte{}
	for ctx.Err() == nil {
		var last []byte
		var read int
		if err := s.pool.QueryRow(ctx, s.q.sweepOwners, after, batch).Scan(&last, &read); err != nil {
			return s.fail("sweeping the owners of no task", err)
		}
		if read < batch {
			return nil
		}
		after = last
	}
	return nil
}
