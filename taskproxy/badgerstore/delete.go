package badgerstore

import (
	"context"
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// DeleteFinished deletes the terminal task id as the sweep deletes an
// expired one (deleteTask: every key, and a tombstone for one ttl more),
// through the committer, whose cache of live records then forgets it. The
// finished-count ceilings ([finishedCeilings]) stay as they are: a ceiling
// only has to stay at or above the true count, and the next walk of the
// owner's finished index counts without the deleted task.
func (s *sweeper) DeleteFinished(ctx context.Context, id string) (*task.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var deleted *task.Task
	err := s.write(func(txn *badger.Txn) (error, error) {
		deleted = nil
		t, err := s.getRecord(txn, id)
		switch {
		case errors.Is(err, task.ErrNotFound):
			if _, terr := txn.Get(tombstoneKey(id)); terr == nil {
				return task.ErrExpired, nil
			}
			return task.ErrNotFound, nil
		case err != nil:
			return nil, err
		}
		deleted = t
		if !t.Status.Terminal() {
			return task.ErrNotFinished, nil
		}
		if _, err := s.deleteTask(txn, expiryKey(t)); err != nil {
			return nil, err
		}
		s.stage(id, nil, false, 0)
		return nil, nil
	})
	if err != nil && !errors.Is(err, task.ErrNotFinished) {
		return nil, err
	}
	return deleted, err
}

var _ task.Deleter = (*Store)(nil)
