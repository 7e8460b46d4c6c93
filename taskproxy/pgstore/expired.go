package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// ListExpiredLeases pages through the active tasks whose lease expired at or
// before now, by task id, reading the lease expiry index: the takeover pass
// of every replica runs it every few seconds, and live leases, the many,
// are never read. See task.ExpiredLeaseLister. (An active task with no
// lease row at all is left to the recovery pass at start.)
func (s *lister) ListExpiredLeases(ctx context.Context, now time.Time, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed.Load() {
		return nil, "", task.ErrClosed
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("pgstore: listing with limit %d", limit)
	}
	schema := pgx.Identifier{s.schema}.Sanitize()
	q := `SELECT t.id, t.record, l.holder, l.expires_ns FROM ` + schema + `.leases l JOIN ` + schema + `.tasks t ON t.id = l.task_id
		WHERE l.expires_ns <= $1 AND l.task_id > $2 AND t.` + active + ` ORDER BY l.task_id LIMIT $3`
	rows, err := s.pool.Query(ctx, q, now.UnixNano(), cursor, limit+1)
	if err != nil {
		return nil, "", s.fail("listing expired leases", err)
	}
	return s.idPage(rows, limit, "listing expired leases")
}

var _ task.ExpiredLeaseLister = (*Store)(nil)
