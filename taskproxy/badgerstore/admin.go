package badgerstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Store-wide listing on Badger for the admin API. The owner index keys,
// o/<owner hash>/<createdAt hex>/<taskId>, carry everything needed to order
// tasks by creation, so a page reads the keys of the owner index (no values)
// to find its place, then only the headers ([handle.readHead]) of the tasks it
// returns or filters out. Its
// cost grows with the number of stored tasks, which the sweeper bounds;
// operators page rarely, so no second, global index is kept on the write
// path for it.

// storeLister lists every owner's tasks: the admin API's listing and
// lookup by id, and recovery's walk of the active index ([opening]).
type storeLister struct {
	*reader
}

// ListAll pages through every owner's tasks, newest first. The cursor is the
// position (<createdAt hex>/<taskId>) of the last task returned.
func (s *storeLister) ListAll(ctx context.Context, filter task.TaskFilter, cursor string, limit int) ([]*task.Task, string, error) {
	var after []byte
	if cursor != "" {
		pos, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !validCursorPosition(pos) {
			return nil, "", task.ErrInvalidCursor
		}
		after = pos
	}
	if limit <= 0 {
		return nil, "", nil
	}
	var tasks []*task.Task
	var next string
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			positions, err := ownerIndexPositions(ctx, txn)
			if err != nil {
				return err
			}
			// Newest first; the id breaks ties of one nanosecond.
			slices.SortFunc(positions, func(a, b []byte) int { return bytes.Compare(b, a) })
			i := 0
			if after != nil {
				i, _ = slices.BinarySearchFunc(positions, after, func(p, target []byte) int { return bytes.Compare(target, p) })
				for i < len(positions) && bytes.Equal(positions[i], after) {
					i++
				}
			}
			for ; i < len(positions); i++ {
				if len(tasks) == limit {
					next = base64.RawURLEncoding.EncodeToString(positions[i-1])
					return nil
				}
				if i%256 == 0 && ctx.Err() != nil {
					return ctx.Err()
				}
				pos := positions[i]
				t, err := s.readSummary(txn, string(pos[17:]))
				if errors.Is(err, task.ErrNotFound) {
					continue // swept between the index and the record
				}
				if err != nil {
					return err
				}
				if filter.Match(t) {
					tasks = append(tasks, t)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	return tasks, next, nil
}

// ownerIndexPositions returns the <createdAt hex>/<taskId> part of every
// owner index key, reading keys only.
func ownerIndexPositions(ctx context.Context, txn *badger.Txn) ([][]byte, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = []byte("o/")
	it := txn.NewIterator(opts)
	defer it.Close()
	var out [][]byte
	for it.Rewind(); it.Valid(); it.Next() {
		if len(out)%4096 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		key := it.Item().Key()
		// o/<32 hex>/<pos>
		if len(key) < 2+32+1+18 {
			continue
		}
		pos := bytes.Clone(key[2+32+1:])
		if validCursorPosition(pos) {
			out = append(out, pos)
		}
	}
	return out, nil
}

// GetAny returns the task with id whatever its owner.
func (s *storeLister) GetAny(ctx context.Context, id string) (*task.Task, error) {
	var t *task.Task
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			var err error
			t, err = s.getTask(txn, id)
			if errors.Is(err, task.ErrNotFound) {
				if _, terr := txn.Get(tombstoneKey(id)); terr == nil {
					return task.ErrExpired
				}
			}
			return err
		})
	})
	return t, err
}

// Interface guard
var _ task.AdminLister = (*Store)(nil)
