package badgerstore

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// A new store gets this build's format version, a store written before the
// key existed gets it at its next open, and a store of a newer format is
// refused rather than misread.
//
//nolint:paralleltest,tparallel // the cases run in order on one store directory
func TestBadgerFormatVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	setFormat := func(t *testing.T, value []byte) {
		t.Helper()
		s, err := Open(Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		err = s.db.Update(func(txn *badger.Txn) error {
			if value == nil {
				return txn.Delete(formatKey)
			}
			return txn.Set(formatKey, value)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	reopen := func(t *testing.T) (uint64, error) {
		t.Helper()
		s, err := Open(Options{Dir: dir})
		if err != nil {
			return 0, err
		}
		defer s.Close()
		return s.FormatVersion()
	}

	tests := []struct {
		name    string
		stored  []byte // nil: no format key, as a store from before it
		want    uint64
		wantErr error
	}{
		{name: "new store", want: FormatVersion},
		{name: "store without a format key", stored: nil, want: FormatVersion},
		{name: "format 1 (before quota keys)", stored: binary.BigEndian.AppendUint64(nil, 1), want: FormatVersion},
		{name: "same format", stored: binary.BigEndian.AppendUint64(nil, FormatVersion), want: FormatVersion},
		{name: "newer format", stored: binary.BigEndian.AppendUint64(nil, FormatVersion+1), wantErr: ErrStoreFormatTooNew},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if i > 0 {
				setFormat(t, tt.stored)
			}
			got, err := reopen(t)
			if tt.wantErr != nil {
				var fe *StoreFormatError
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &fe) || fe.Found != FormatVersion+1 {
					t.Fatalf("open = %v, want %v naming the version found", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("format version = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}
