package pgstore

import (
	"context"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
)

// Stats counts the tasks and active tasks and adds up the disk space of the
// store's tables with their indexes. It scans, so metrics call it at most
// every few seconds (taskproxy.StatsReporter).
func (s *Store) Stats(ctx context.Context) (taskproxy.StoreStats, error) {
	if s.closed.Load() {
		return taskproxy.StoreStats{}, taskproxy.ErrClosed
	}
	var st taskproxy.StoreStats
	if err := s.pool.QueryRow(ctx, s.q.stats, s.schema).Scan(&st.Tasks, &st.Active, &st.Bytes); err != nil {
		return taskproxy.StoreStats{}, s.fail("counting tasks", err)
	}
	return st, nil
}

var _ taskproxy.StatsReporter = (*Store)(nil)
