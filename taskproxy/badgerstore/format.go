package badgerstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// The store's format version. A build writes the version it knows into a
// store that has none (a new store, or one written before the key
// existed, whose layout every build since reads) and refuses to open a
// store whose version is newer than its own: an older gateway would
// misread what a newer one wrote, and silently dropping tasks is worse
// than not starting. Bump FormatVersion when a change of the key
// layout or of the record encoding is one an older build cannot read.

// FormatVersion is the format this build writes and reads.
//
// 2: tasks of anonymous callers carry a quota key (their client address),
// and the active and finished indexes count them under its hash rather
// than their owner's. A store of format 1 is one of format 2 without such
// tasks, so opening it only raises its version. A build of format 1 would
// not know where those tasks' index keys are: it would leave them behind
// when they end or expire, and their client address would count them
// for ever.
const FormatVersion = 2

var formatKey = []byte("m/format")

// ErrStoreFormatTooNew means the store was written by a newer build, in a
// format this build cannot read; the error is a *StoreFormatError.
var ErrStoreFormatTooNew = errors.New("task store format is newer than this build")

// StoreFormatError reports a store's format version and the newest this
// build reads.
type StoreFormatError struct{ Found, Known uint64 }

func (e *StoreFormatError) Error() string {
	return fmt.Sprintf("task store format version %d is newer than this build knows (%d): run the newer build, or restore the backup taken before the upgrade", e.Found, e.Known)
}

// Is makes errors.Is(err, ErrStoreFormatTooNew) hold.
func (e *StoreFormatError) Is(target error) bool { return target == ErrStoreFormatTooNew }

// checkFormat reads the format version of the store in db, writing this
// build's into a store that has none or an older one (every older format
// is read as it is), and refuses a newer one.
func checkFormat(db *badger.DB) error {
	err := db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set(formatKey, binary.BigEndian.AppendUint64(nil, FormatVersion))
		}
		if err != nil {
			return err
		}
		var found uint64
		if err := item.Value(func(v []byte) error {
			if len(v) != 8 {
				return errors.New("malformed format version")
			}
			found = binary.BigEndian.Uint64(v)
			return nil
		}); err != nil {
			return err
		}
		switch {
		case found > FormatVersion:
			return &StoreFormatError{Found: found, Known: FormatVersion}
		case found < FormatVersion:
			return txn.Set(formatKey, binary.BigEndian.AppendUint64(nil, FormatVersion))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checking the store's format version: %w", err)
	}
	return nil
}

// FormatVersion returns the store's format version.
func (s *Store) FormatVersion() (uint64, error) {
	var version uint64
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(formatKey)
		if err != nil {
			return err
		}
		return item.Value(func(v []byte) error {
			if len(v) != 8 {
				return errors.New("malformed format version")
			}
			version = binary.BigEndian.Uint64(v)
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("reading the store's format version: %w", err)
	}
	return version, nil
}
