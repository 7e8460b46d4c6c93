package task

import (
	"context"
	"errors"
	"io"
)

// Backuper is a Store that writes a consistent backup of itself while it
// serves: a snapshot of the whole store at one moment, whatever is written
// meanwhile, in the backend's own format (its backend package restores
// it). It is an optional interface beside Store: a backend without it is
// backed up with its own tools (PostgreSQL: pg_dump).
type Backuper interface {
	// Backup writes the backup to w. It bypasses the owner binding every
	// Store method enforces: only the operator's admin API may call it.
	Backup(ctx context.Context, w io.Writer) error
}

// ErrNoBackup means the store backend cannot write an online backup (it
// does not implement Backuper).
var ErrNoBackup = errors.New("task store backend has no online backup")
