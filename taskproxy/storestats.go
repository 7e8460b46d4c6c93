package taskproxy

import (
	"context"
	"fmt"
	"os"

	"github.com/dgraph-io/badger/v4"
)

// StoreStats is a store's size, for metrics.
type StoreStats struct {
	// Tasks is the number of task records stored, ended ones included
	// (until the sweep after their ttl).
	Tasks int
	// Active is the number of tasks not yet completed, failed or cancelled.
	Active int
	// Bytes is the disk space of the store's files (0 in memory).
	Bytes int64
}

// StatsReporter is a Store that can report its size. Stats walks indexes, so
// callers must not call it per request: metrics call it at most every few
// seconds.
type StatsReporter interface {
	Stats(ctx context.Context) (StoreStats, error)
}

// Stats counts the record and active-index keys (keys only, no values read)
// and adds up the disk space of the store's files. Badger's own Size is
// refreshed once a minute and counts preallocated value logs in full.
func (s *BadgerStore) Stats(ctx context.Context) (StoreStats, error) {
	var st StoreStats
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			var err error
			if st.Tasks, err = countPrefix(ctx, txn, []byte("t/")); err != nil {
				return err
			}
			st.Active, err = countPrefix(ctx, txn, []byte("a/"))
			return err
		})
	})
	if err != nil {
		return StoreStats{}, fmt.Errorf("counting tasks: %w", err)
	}
	st.Bytes = dirUsage(s.db.Opts().Dir)
	if vdir := s.db.Opts().ValueDir; vdir != s.db.Opts().Dir {
		st.Bytes += dirUsage(vdir)
	}
	return st, nil
}

// dirUsage adds up the disk space of the files directly in dir (Badger
// keeps no subdirectories); errors count as nothing, it is a gauge.
func dirUsage(dir string) int64 {
	if dir == "" {
		return 0
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var total int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			total += allocated(info)
		}
	}
	return total
}

func countPrefix(ctx context.Context, txn *badger.Txn, prefix []byte) (int, error) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = prefix
	it := txn.NewIterator(opts)
	defer it.Close()
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		if n%4096 == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
		n++
	}
	return n, nil
}

// StoreStats reports the size of the runtime's store; ok is false when the
// store cannot tell (it does not implement StatsReporter, or is not open yet).
func (rt *Runtime) StoreStats(ctx context.Context) (st StoreStats, ok bool, err error) {
	if !rt.Ready() { // a lazy runtime's store is not open before its first start
		return StoreStats{}, false, nil
	}
	sr, ok := rt.Store.(StatsReporter)
	if !ok {
		return StoreStats{}, false, nil
	}
	st, err = sr.Stats(ctx)
	return st, true, err
}

// Interface guard
var _ StatsReporter = (*BadgerStore)(nil)
