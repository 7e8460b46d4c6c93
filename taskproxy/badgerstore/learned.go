package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What the gateway learned of upstreams, in Badger:
//
//	u/<sha256(key)>    the value, with a Badger TTL
//
// Written directly, as session bindings are: one small key, written when
// an upstream's initialize answer passes and what it declared changed or
// is getting old. Stores of earlier versions have no such keys, and read
// none: the gateway then learns from the upstream again.

// learned keeps what was learned of upstreams.
type learned struct {
	*handle
}

func learnedKey(key string) []byte { return hashedKey("u/", key) }

// SaveLearned stores value under key for ttl.
func (l *learned) SaveLearned(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return l.use(func() error {
		return l.retryConflicts(ctx, "storing what was learned of an upstream", func(txn *badger.Txn) error {
			return txn.SetEntry(withTTL(badger.NewEntry(learnedKey(key), value), time.Now(), ttl))
		})
	})
}

// LoadLearned returns the value stored under key.
func (l *learned) LoadLearned(_ context.Context, key string) ([]byte, error) {
	var value []byte
	err := l.use(func() error {
		return l.db.View(func(txn *badger.Txn) error {
			item, err := txn.Get(learnedKey(key))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return task.ErrNotFound
			}
			if err != nil {
				return fmt.Errorf("reading what was learned of an upstream: %w", err)
			}
			value, err = item.ValueCopy(nil)
			return err
		})
	})
	return value, err
}

// The seam is the task.LearnedStore part of the store contract on its own.
var _ task.LearnedStore = (*learned)(nil)
