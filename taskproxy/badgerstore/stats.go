package badgerstore

import (
	"context"
	"fmt"
	"os"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Stats counts the record and active-index keys (keys only, no values read)
// and adds up the disk space of the store's files. Badger's own Size is
// refreshed once a minute and counts preallocated value logs in full.
func (s *Store) Stats(ctx context.Context) (task.StoreStats, error) {
	var st task.StoreStats
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
		return task.StoreStats{}, fmt.Errorf("counting tasks: %w", err)
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

// Interface guard
var _ task.StatsReporter = (*Store)(nil)
