package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Online backup and restore. Badger streams a consistent backup of a live
// database (a snapshot at one read timestamp, whatever is written
// meanwhile), so a running gateway is backed up without stopping it;
// Restore loads such a backup into a new directory, which a gateway then
// opens as it opens any store.

var _ task.Backuper = (*Store)(nil)

// Backup writes a consistent backup of the whole store to w, in Badger's
// backup format (what "badger backup" writes and Restore reads). Ending
// ctx ends it at the next write.
func (s *handle) Backup(ctx context.Context, w io.Writer) error {
	return s.use(func() error {
		if _, err := s.db.Backup(ctxWriter{ctx: ctx, w: w}, 0); err != nil {
			return fmt.Errorf("backing up the task store: %w", err)
		}
		return nil
	})
}

// ctxWriter fails its writes once ctx is done: Badger's backup stream
// takes no context of its own.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// Restore loads a backup that Backup wrote into dir, which must not exist
// or be empty (a restore never merges into a store), with the options a
// store is opened with; a gateway then opens dir as its storage
// directory. A file that is not a backup of a task store, or of a format
// newer than this build's, is refused, and dir is left as it was found
// (what the failed load wrote is removed), so that the next restore can
// use it.
func Restore(dir string, backup io.Reader, logger *zap.Logger) (err error) {
	entries, err := os.ReadDir(dir)
	existed := err == nil
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("restoring into %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("restoring into %s: the directory is not empty; restore into a new directory, then point storage_dir at it", dir)
	}
	db, err := badger.Open(badgerOptions(Options{Dir: dir, SyncWrites: true, Logger: logger}))
	if err != nil {
		return fmt.Errorf("restoring into %s: opening badger: %w", dir, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("restoring into %s: closing badger: %w", dir, cerr)
		}
		if err != nil {
			clearRestore(dir, existed)
		}
	}()
	if err := loadBackup(db, backup); err != nil {
		return fmt.Errorf("restoring into %s: loading the backup (is it a backup of a task store?): %w", dir, err)
	}
	// Every store has its format version from its first opening: without
	// one, this was not a backup of a task store (or an empty file).
	if err := db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(formatKey)
		return err
	}); err != nil {
		return fmt.Errorf("restoring into %s: the backup holds no task store (no format version): %w", dir, err)
	}
	if err := checkFormat(db); err != nil {
		return fmt.Errorf("restoring into %s: %w", dir, err)
	}
	return nil
}

// loadBackup is Badger's Load, which panics on some bytes that are not a
// backup (a length beyond any slice): such a file is refused, not a crash.
func loadBackup(db *badger.DB, backup io.Reader) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("not a backup: %v", v)
		}
	}()
	return db.Load(backup, 256)
}

// clearRestore removes what a failed restore wrote into dir: dir itself
// when the restore made it, else its entries (it was empty).
func clearRestore(dir string, existed bool) {
	if !existed {
		_ = os.RemoveAll(dir)
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
