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
// their own expiry. Rows locked by a concurrent write are skipped, so two
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
	return total, ctx.Err()
}
