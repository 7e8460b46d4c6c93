package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// DeleteFinished deletes the terminal task id as the sweep deletes an
// expired one (its lease row goes with it, and a tombstone stays for one
// ttl more), and drops it from this process's cache of finished records.
// Another replica's cache may still serve the record to its owner until
// finishedCacheMargin before its ttl ends. The owner's finished ceiling
// ([ownerBounds]) stays: it only has to stay at or above the true count.
func (s *sweeper) DeleteFinished(ctx context.Context, id string) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	var record []byte
	err := s.pool.QueryRow(wctx, s.q.deleteFinished, id, time.Now().UnixNano()).Scan(&record)
	s.finished.forget(id)
	switch {
	case err == nil:
		t, err := decodeTask(record, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding deleted task %s: %w", id, err)
		}
		return t, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, s.fail("deleting task "+id, err)
	}
	// Nothing deleted: the task is not finished, unknown, or gone.
	t, err := readAgain(ctx, s.database, func(q reader) (*task.Task, error) { return (&adminLister{database: s.database}).getAny(ctx, q, id) })
	if err != nil {
		return nil, err
	}
	return t, task.ErrNotFinished
}

var _ task.Deleter = (*Store)(nil)
