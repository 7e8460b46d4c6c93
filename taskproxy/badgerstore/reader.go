package badgerstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// reader reads an owner's tasks: the record, its header ([handle.readHead]) and the
// owner index with its signed cursors ([cursorSigner]).
type reader struct {
	*handle
	*opening
	*cursorSigner
}

// getTask is getRecord for the store's reads: it spares the lease key's
// lookup for a task whose record carries a lease of this opening
// (readRecord), which is every task created since the store was opened and
// not yet renewed.
func (s *reader) getTask(txn *badger.Txn, id string) (*task.Task, error) {
	t, _, err := s.readRecord(txn, id, s.holderPrefix())
	return t, err
}

// Get returns the owner's task. The owner is checked on the task's header
// ([handle.readHead]), so another owner's task is refused without reading its
// record, whatever its size.
func (s *reader) Get(ctx context.Context, owner, id string) (*task.Task, error) {
	var t *task.Task
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			rec, whole, err := s.checkOwner(txn, id, owner)
			switch {
			case err != nil:
				return missing(txn, owner, id, err)
			case whole == nil:
				if whole, err = s.decodeItem(rec, id); err != nil {
					return err
				}
			}
			// As getTask: the lease of this opening in the record is its own.
			_, err = resolveLease(txn, whole, s.holderPrefix())
			t = whole
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// missing is the answer of the owner's read of id that checkOwner refused
// with err: another owner's task as ErrForeign, none as its tombstone says
// (ErrExpired or ErrNotFound), any other error as it is.
func missing(txn *badger.Txn, owner, id string, err error) error {
	if errors.Is(err, task.ErrNotFound) && !errors.Is(err, task.ErrForeign) {
		return tombstone(txn, owner, id)
	}
	return err
}

// GetSummary returns the summary of the owner's task from its header
// ([handle.readHead]), never reading its record unless the header is not the
// record's (a store written before headers).
func (s *reader) GetSummary(ctx context.Context, owner, id string) (*task.Task, error) {
	var t *task.Task
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			_, whole, err := s.checkOwner(txn, id, owner)
			switch {
			case err != nil:
				return missing(txn, owner, id, err)
			case whole != nil: // read whole already: its summary
				if _, err := resolveLease(txn, whole, s.holderPrefix()); err != nil {
					return err
				}
				t = whole.Summary()
				return nil
			}
			t, err = s.readSummary(txn, id)
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// List pages through the owner index, reading the tasks' headers only.
func (s *reader) List(ctx context.Context, owner, cursor string, limit int) ([]*task.Task, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("listing tasks: the page size must be positive, got %d", limit)
	}
	prefix := ownerPrefix(owner)
	start := prefix
	if cursor != "" {
		pos, err := s.readCursor(owner, cursor)
		if err != nil {
			return nil, "", err
		}
		start = append(append(bytes.Clone(prefix), pos...), 0) // just past the last key returned
	}
	var tasks []*task.Task
	var next string
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
				key := it.Item().Key()
				if len(tasks) == limit {
					next = s.issueCursor(owner, lastKeyPosition(tasks[len(tasks)-1]))
					return nil
				}
				id := string(key[bytes.LastIndexByte(key, '/')+1:])
				t, err := s.readSummary(txn, id)
				if errors.Is(err, task.ErrNotFound) {
					continue // swept between the index and the record
				}
				if err != nil {
					return err
				}
				tasks = append(tasks, t)
			}
			return nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	return tasks, next, nil
}

func lastKeyPosition(t *task.Task) []byte {
	return fmt.Appendf(nil, "%016x/%s", t.CreatedAt.UnixNano(), t.ID)
}

// validCursorPosition checks the shape "<16 hex digits>/<task id>".
func validCursorPosition(pos []byte) bool {
	if len(pos) < 18 || pos[16] != '/' {
		return false
	}
	if _, err := hex.DecodeString(string(pos[:16])); err != nil {
		return false
	}
	for _, c := range pos[17:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CountActive counts the non-terminal tasks of quota (Task.Quota) from
// the active index, reading keys only.
func (s *reader) CountActive(ctx context.Context, quota string) (int, error) {
	n := 0
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			n = countActive(txn, quota, 0)
			return nil
		})
	})
	return n, err
}

// countActive counts the active-index keys of quota in txn, stopping at
// upTo when it is positive: a quota check reads no more than the quota.
func countActive(txn *badger.Txn, quota string, upTo int) int {
	prefix := activePrefix(quota)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	n := 0
	for it.Rewind(); it.ValidForPrefix(prefix) && (upTo <= 0 || n < upTo); it.Next() {
		n++
	}
	return n
}
