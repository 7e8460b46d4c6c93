package runtime

import (
	"context"
	"io"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Backup writes a consistent backup of the runtime's store to w
// (task.Backuper), while it serves. It gives ErrNotReady before the store
// opened and ErrNoBackup for a backend without online backups.
func (op Operator) Backup(ctx context.Context, w io.Writer) error {
	rt := op.rt
	if !rt.Ready() {
		return task.ErrNotReady
	}
	b, ok := rt.Store.(task.Backuper)
	if !ok {
		return task.ErrNoBackup
	}
	return b.Backup(ctx, w)
}
