package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Leaderships. A duty that one replica does for all (sweeping) has a row in
// the leaders table: its holder and the end of its term. Taking or renewing
// it is one guarded upsert that lands when the row is new, its term ran out,
// or it is already the holder's, so of replicas racing exactly one leads. A
// row and not a session advisory lock: it works through transaction
// poolers, and a leader that dies loses the duty when its term ends.

// leadership keeps the leaders table.
type leadership struct {
	*database
}

// TryLead takes or renews the leadership name for holder until ttl from
// now; see task.Leader.
func (s *leadership) TryLead(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if s.closed.Load() {
		return false, task.ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	q := `INSERT INTO ` + pgx.Identifier{s.schema}.Sanitize() + `.leaders AS l (name, holder, expires_ns) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_ns = EXCLUDED.expires_ns
		WHERE l.holder = EXCLUDED.holder OR l.expires_ns <= $4
		RETURNING holder`
	now := time.Now()
	var got string
	var err error
	for range maxRetries {
		err = s.pool.QueryRow(ctx, q, name, holder, now.Add(ttl).UnixNano(), now.UnixNano()).Scan(&got)
		if !retryable(err) {
			break
		}
	}
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil // another holder's term runs
	case err != nil:
		return false, s.fail("taking the leadership "+name, err)
	}
	return got == holder, nil
}

var _ task.Leader = (*Store)(nil)
