package badgerstore

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Below the free-space reserve every write is refused as unavailable
// (creates, outcomes, leases), reads go on, and once there is room again
// the refused writes succeed. The end-to-end test fills a real filesystem;
// here the reserve is set above any disk's size.
func TestDiskGuardRefusesWritesBelowReserve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept := testTask("alice", time.Now())
	if err := s.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	s.guard.minFree = math.MaxInt64 // the filesystem is "full"
	for _, w := range []struct {
		name  string
		write func() error
	}{
		{"create", func() error { return s.Create(ctx, testTask("alice", time.Now())) }},
		{"outcome", func() error {
			_, err := s.Update(ctx, "alice", kept.ID, func(rec *task.Task) error {
				return rec.SetStatus(task.StatusCompleted, "", time.Now())
			})
			return err
		}},
		{"lease", func() error {
			_, err := s.Acquire(ctx, "alice", kept.ID, s.Holder(), time.Now(), time.Minute)
			return err
		}},
	} {
		err := w.write()
		if !errors.Is(err, task.ErrUnavailable) || !errors.Is(err, ErrDiskFull) {
			t.Errorf("%s below the reserve: %v, want ErrDiskFull (task.ErrUnavailable)", w.name, err)
		}
	}
	if got, err := s.Get(ctx, "alice", kept.ID); err != nil || got.Status != task.StatusWorking {
		t.Errorf("a read below the reserve: %+v, %v", got, err)
	}
	s.guard.minFree = 0 // room again
	if _, err := s.Update(ctx, "alice", kept.ID, func(rec *task.Task) error {
		return rec.SetStatus(task.StatusCompleted, "", time.Now())
	}); err != nil {
		t.Errorf("the outcome once there is room: %v", err)
	}
}

// A filesystem that refuses writes (the probe file cannot be written)
// refuses the store's writes as unavailable.
func TestDiskGuardRefusesWritesOnReadOnly(t *testing.T) {
	t.Parallel()
	s, ro := storeWithReadOnlyProbe(t)
	rw := s.guard.probe
	s.guard.probe = ro
	err := s.Create(context.Background(), testTask("alice", time.Now()))
	if !errors.Is(err, task.ErrUnavailable) || !errors.Is(err, ErrReadOnly) {
		t.Errorf("a write on a read-only filesystem: %v, want ErrReadOnly (task.ErrUnavailable)", err)
	}
	s.guard.probe = rw
	if err := s.Create(context.Background(), testTask("alice", time.Now())); err != nil {
		t.Errorf("a write once the filesystem is writable again: %v", err)
	}
}

// A filesystem that turns read-only between the guard's check and the
// write: the write's error is classified as the guard's (unavailable), not
// passed on as an internal error. A write that fails on a writable
// filesystem keeps its own error.
func TestWriteFailureOnAFilesystemTurnedReadOnly(t *testing.T) {
	t.Parallel()
	failed := errors.New("write: read-only file system")
	tests := []struct {
		name     string
		readOnly bool
		want     error
	}{
		{"turned read-only during the write", true, ErrReadOnly},
		{"still writable", false, failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A store of its own: the case swaps its probe, which a store
			// shared with the other case would see (a data race, and a
			// probe turned read-only under the writable case).
			s, ro := storeWithReadOnlyProbe(t)
			rw := s.guard.probe
			err := s.retryConflicts(context.Background(), "a test write", func(*badger.Txn) error {
				if tt.readOnly {
					s.guard.probe = ro
				}
				return failed
			})
			s.guard.probe = rw
			if !errors.Is(err, tt.want) || !errors.Is(err, failed) {
				t.Errorf("write error = %v, want %v wrapping the write's own", err, tt.want)
			}
			if tt.readOnly != errors.Is(err, task.ErrUnavailable) {
				t.Errorf("write error = %v: unavailable %v, want %v", err, errors.Is(err, task.ErrUnavailable), tt.readOnly)
			}
		})
	}
}

// storeWithReadOnlyProbe opens a store on disk and returns with it a probe
// that cannot be written, as on a filesystem the kernel turned read-only: a
// read-only descriptor of the store's probe file. Both close with the test.
func storeWithReadOnlyProbe(t *testing.T) (*Store, *os.File) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ro, err := os.Open(filepath.Join(dir, probeFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ro.Close() })
	return s, ro
}

// A write the filesystem may have taken in memory only is not confirmed:
// when the filesystem stops taking writes while a write is in flight (here
// the guard's probe fails from inside the transaction, as on ext4 turned
// read-only after an error, whose sync then succeeds without writing), the
// write is reported as ErrReadOnly (task.ErrUnavailable), so that its
// caller never acknowledges it.
func TestWriteUnconfirmedWhenFilesystemTurnsReadOnly(t *testing.T) {
	t.Parallel()
	s, err := Open(Options{Dir: t.TempDir(), MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.retryConflicts(context.Background(), "a test write", func(txn *badger.Txn) error {
		// The probe's file goes away under the guard: its next write fails.
		if err := s.guard.probe.Close(); err != nil {
			t.Error(err)
		}
		return txn.Set([]byte("k"), []byte("v"))
	})
	if !errors.Is(err, ErrReadOnly) || !errors.Is(err, task.ErrUnavailable) {
		t.Errorf("a write during which the filesystem stopped taking writes: %v, want ErrReadOnly (task.ErrUnavailable)", err)
	}
}
