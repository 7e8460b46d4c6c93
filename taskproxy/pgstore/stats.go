package pgstore

import (
	"context"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Stats counts the tasks and active tasks and adds up the disk space of the
// store's tables with their indexes. It scans, so metrics call it at most
// every few seconds (task.StatsReporter).
func (s *Store) Stats(ctx context.Context) (task.StoreStats, error) {
	if s.closed.Load() {
		return task.StoreStats{}, task.ErrClosed
	}
	var st task.StoreStats
	if err := s.pool.QueryRow(ctx, s.q.stats, s.schema).Scan(&st.Tasks, &st.Active, &st.Bytes); err != nil {
		return task.StoreStats{}, s.fail("counting tasks", err)
	}
	return st, nil
}

var _ task.StatsReporter = (*Store)(nil)
