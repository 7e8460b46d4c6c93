package badgerstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Session bindings in Badger:
//
//	s/<sha256(session id)>    the owner hash, with a Badger TTL
//
// The session id is hashed so that the key has a fixed shape and the store
// holds no usable session id. Bindings expire by Badger's TTL, not by the
// sweeper; they are written directly, not through the task committer, since
// they touch one small key and are rare (at initialize, and when a session
// in use is refreshed, at most every few minutes).

// sessions keeps the session bindings.
type sessions struct {
	*handle
}

func sessionKey(sessionID string) []byte { return hashedKey("s/", sessionID) }

// hashedKey is prefix and the hex SHA-256 of s: a key of a fixed shape
// that holds nothing usable of s (a session id, say).
func hashedKey(prefix, s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return []byte(prefix + hex.EncodeToString(sum[:]))
}

// sessionBinding reports whether sessionID is bound to owner in txn: nil,
// ErrForeign or ErrNotFound.
func sessionBinding(txn *badger.Txn, sessionID, owner string) error {
	item, err := txn.Get(sessionKey(sessionID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return task.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("reading a session binding: %w", err)
	}
	want := []byte(ownerHash(owner))
	return item.Value(func(v []byte) error {
		if !bytes.Equal(v, want) {
			return task.ErrForeign
		}
		return nil
	})
}

// setSessionBinding (re)writes the binding of sessionID to owner for ttl,
// and extends its client's description, if any, to the same expiry.
func setSessionBinding(txn *badger.Txn, sessionID, owner string, ttl time.Duration) error {
	e := withTTL(badger.NewEntry(sessionKey(sessionID), []byte(ownerHash(owner))), time.Now(), ttl)
	if err := txn.SetEntry(e); err != nil {
		return err
	}
	return extendDescription(txn, sessionID, e.ExpiresAt)
}

// BindSession binds sessionID to owner for ttl, unless another owner has it.
func (s *sessions) BindSession(ctx context.Context, sessionID, owner string, ttl time.Duration) error {
	return s.use(func() error {
		return s.retryConflicts(ctx, "binding a session", func(txn *badger.Txn) error {
			err := sessionBinding(txn, sessionID, owner)
			if err != nil && (errors.Is(err, task.ErrForeign) || !errors.Is(err, task.ErrNotFound)) {
				return err
			}
			if err != nil { // a new binding: no description is carried over
				if err := txn.Delete(descriptionKey(sessionID)); err != nil {
					return err
				}
			}
			return setSessionBinding(txn, sessionID, owner, ttl)
		})
	})
}

// CheckSession checks, and with refresh > 0 extends, a session binding.
func (s *sessions) CheckSession(ctx context.Context, sessionID, owner string, refresh time.Duration) error {
	return s.use(func() error {
		if refresh <= 0 {
			return s.db.View(func(txn *badger.Txn) error { return sessionBinding(txn, sessionID, owner) })
		}
		return s.retryConflicts(ctx, "refreshing a session binding", func(txn *badger.Txn) error {
			if err := sessionBinding(txn, sessionID, owner); err != nil {
				return err // an unknown or foreign session is never written
			}
			return setSessionBinding(txn, sessionID, owner, refresh)
		})
	})
}

// ForgetSession deletes the binding of sessionID.
func (s *sessions) ForgetSession(ctx context.Context, sessionID string) error {
	return s.use(func() error {
		return s.retryConflicts(ctx, "forgetting a session", func(txn *badger.Txn) error {
			if err := txn.Delete(descriptionKey(sessionID)); err != nil {
				return err
			}
			return txn.Delete(sessionKey(sessionID))
		})
	})
}

// The seam is the task.SessionBinder half of the store contract on its own.
var _ task.SessionBinder = (*sessions)(nil)
