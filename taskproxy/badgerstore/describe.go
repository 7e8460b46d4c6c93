package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A session's client description in Badger:
//
//	d/<sha256(session id)>    the description, expiring with the binding
//
// It is a key of its own beside the binding (s/, [sessions]), so that a
// binding written by an older build reads as one without a description and
// an older build reads a newer binding as before. Every write of the
// binding gives the description the binding's expiry.

func descriptionKey(sessionID string) []byte { return hashedKey("d/", sessionID) }

// extendDescription gives the description of sessionID, if any, the
// expiry expiresAt (Unix seconds, as Badger keeps it).
func extendDescription(txn *badger.Txn, sessionID string, expiresAt uint64) error {
	item, err := txn.Get(descriptionKey(sessionID))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading a session's description: %w", err)
	}
	desc, err := item.ValueCopy(nil)
	if err != nil {
		return fmt.Errorf("reading a session's description: %w", err)
	}
	e := badger.NewEntry(descriptionKey(sessionID), desc)
	e.ExpiresAt = expiresAt
	return txn.SetEntry(e)
}

// DescribeSession stores desc with the binding of sessionID to owner.
func (s *sessions) DescribeSession(ctx context.Context, sessionID, owner string, desc []byte) error {
	return s.use(func() error {
		return s.retryConflicts(ctx, "describing a session", func(txn *badger.Txn) error {
			if err := sessionBinding(txn, sessionID, owner); err != nil {
				return err
			}
			item, err := txn.Get(sessionKey(sessionID))
			if err != nil {
				return fmt.Errorf("reading a session binding: %w", err)
			}
			e := badger.NewEntry(descriptionKey(sessionID), desc)
			e.ExpiresAt = item.ExpiresAt()
			return txn.SetEntry(e)
		})
	})
}

// SessionDescription returns the description stored with the binding of
// sessionID to owner (nil for none).
func (s *sessions) SessionDescription(_ context.Context, sessionID, owner string) ([]byte, error) {
	var desc []byte
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			if err := sessionBinding(txn, sessionID, owner); err != nil {
				return err
			}
			item, err := txn.Get(descriptionKey(sessionID))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading a session's description: %w", err)
			}
			desc, err = item.ValueCopy(nil)
			return err
		})
	})
	return desc, err
}

// The seam is the task.SessionDescriber part of the store contract on its own.
var _ task.SessionDescriber = (*sessions)(nil)
