package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Expiry on Badger: the sweeper walks the expiry index, which sorts by
// expiry time, and deletes each expired task with all its keys, leaving a
// tombstone so that its owner learns "expired" rather than "not found" for
// one ttl more.

// sweeper deletes expired tasks, through the committer, and runs the
// value-log garbage collection on its schedule.
type sweeper struct {
	*committer
	// gcStop ends the scheduled value-log GC; gcDone closes when it has.
	gcStop, gcDone chan struct{}
	gcOnce         sync.Once
}

func tombstoneKey(id string) []byte { return []byte("x/" + id) }

// tombstone gives ErrExpired when owner's task id was swept, ErrNotFound
// otherwise (for other owners too, so existence never leaks).
func tombstone(txn *badger.Txn, owner, id string) error {
	item, err := txn.Get(tombstoneKey(id))
	if err != nil {
		return task.ErrNotFound
	}
	var mine bool
	_ = item.Value(func(v []byte) error { mine = string(v) == ownerHash(owner); return nil })
	if mine {
		return task.ErrExpired
	}
	return task.ErrNotFound
}

// Sweep deletes the tasks that expired before now, batch by batch.
func (s *sweeper) Sweep(ctx context.Context, now time.Time, batch int) (int, error) {
	total := 0
	for {
		ids, err := s.expired(now, batch)
		if err != nil || len(ids) == 0 {
			return total, err
		}
		// Through the committer, which keeps a cache of the live records
		// it wrote ([committer.readLive]): it learns of the deletions.
		err = s.write(func(txn *badger.Txn) (error, error) {
			for _, k := range ids {
				id, err := s.deleteTask(txn, k)
				if err != nil {
					return nil, err
				}
				s.stage(id, nil, false, 0)
			}
			return nil, nil
		})
		if err != nil {
			return total, err
		}
		total += len(ids)
		if len(ids) < batch || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// expired returns up to limit expiry-index keys due before now.
func (s *sweeper) expired(now time.Time, limit int) ([][]byte, error) {
	var keys [][]byte
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			prefix := []byte("e/")
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Rewind(); it.ValidForPrefix(prefix) && len(keys) < limit; it.Next() {
				key := it.Item().KeyCopy(nil)
				due, err := strconv.ParseInt(string(key[2:18]), 16, 64)
				if err != nil {
					return fmt.Errorf("malformed expiry key %q", key)
				}
				if due > now.UnixNano() {
					return nil
				}
				keys = append(keys, key)
			}
			return nil
		})
	})
	return keys, err
}

// deleteTask removes the task of an expiry key and every key of it, and
// leaves its tombstone for one more ttl. It returns the task's id.
func (s *handle) deleteTask(txn *badger.Txn, expiry []byte) (string, error) {
	id := string(expiry[bytes.LastIndexByte(expiry, '/')+1:])
	if err := txn.Delete(expiry); err != nil {
		return id, err
	}
	t, err := s.getRecord(txn, id)
	if errors.Is(err, task.ErrNotFound) {
		return id, nil
	}
	if err != nil {
		return id, err
	}
	keys := [][]byte{recordKey(id), headerKey(id), leaseKey(id), ownerKey(t), activeKey(t), finishedKey(t)}
	if t.IdempotencyKey != "" {
		keys = append(keys, idempotencyKey(t))
	}
	for _, k := range keys {
		if err := txn.Delete(k); err != nil {
			return id, err
		}
	}
	// Badger keeps expiry in whole seconds, rounding down: a second more
	// keeps the tombstone for at least the ttl (a task of a 1 s ttl had its
	// "expired" turn into "not found" within a fraction of a second).
	stone := badger.NewEntry(tombstoneKey(id), []byte(ownerHash(t.Owner))).WithTTL(max(t.TTL, time.Second) + time.Second)
	return id, txn.SetEntry(stone)
}

// CollectGarbage rewrites value-log files that are mostly garbage, until
// Badger finds none worth it.
func (s *sweeper) CollectGarbage() error {
	return s.use(func() error {
		for range 16 {
			if err := s.guard.check(); err != nil {
				return nil // a rewrite needs room; the next run tries again
			}
			if err := s.db.RunValueLogGC(0.5); err != nil {
				if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
					return nil
				}
				return fmt.Errorf("value log GC: %w", err)
			}
		}
		return nil
	})
}

// collectGarbageEvery runs CollectGarbage on a schedule until Close.
func (s *sweeper) collectGarbageEvery(interval time.Duration, log *zap.Logger) {
	defer close(s.gcDone)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-s.gcStop:
			return
		case <-tick.C:
			if err := s.CollectGarbage(); err != nil && !errors.Is(err, task.ErrClosed) && log != nil {
				log.Warn("value log garbage collection", zap.Error(err))
			}
		}
	}
}
