package badgerstore

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Listing cursors. A cursor names the position of the last key a page
// returned, and carries a MAC of that position and the owner under a secret
// kept in the store: the store accepts only cursors it issued, to the same
// owner, so a forged cursor, or one of another owner, is refused
// (ErrInvalidCursor) rather than used to seek through the index.

var cursorSecretKey = []byte("m/cursor-secret")

// cursorSigner issues and checks the owners' listing cursors.
type cursorSigner struct {
	// cursorSecret signs the cursors.
	cursorSecret []byte
}

// loadCursorSecret reads the store's cursor secret from db, creating it on
// the first open, so cursors stay valid across restarts.
func (s *cursorSigner) loadCursorSecret(db *badger.DB) error {
	err := db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(cursorSecretKey)
		if err == nil {
			s.cursorSecret, err = item.ValueCopy(nil)
			if err == nil && len(s.cursorSecret) != 32 {
				err = errors.New("malformed cursor secret")
			}
			return err
		}
		if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		secret := make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return err
		}
		s.cursorSecret = secret
		return txn.Set(cursorSecretKey, secret)
	})
	if err != nil {
		return fmt.Errorf("loading the cursor secret: %w", err)
	}
	return nil
}

func (s *cursorSigner) cursorMAC(owner string, pos []byte) []byte {
	m := hmac.New(sha256.New, s.cursorSecret)
	m.Write([]byte(ownerHash(owner)))
	m.Write([]byte{0})
	m.Write(pos)
	return m.Sum(nil)[:16]
}

// issueCursor returns the owner's cursor for a listing position.
func (s *cursorSigner) issueCursor(owner string, pos []byte) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString(pos) + "." + enc.EncodeToString(s.cursorMAC(owner, pos))
}

// readCursor returns the position of a cursor the store issued to owner.
func (s *cursorSigner) readCursor(owner, cursor string) ([]byte, error) {
	enc := base64.RawURLEncoding
	p, m, ok := strings.Cut(cursor, ".")
	if !ok {
		return nil, task.ErrInvalidCursor
	}
	pos, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.cursorMAC(owner, pos)) || !validCursorPosition(pos) {
		return nil, task.ErrInvalidCursor
	}
	return pos, nil
}
