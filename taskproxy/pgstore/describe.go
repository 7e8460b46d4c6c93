package pgstore

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A session's client description is a column of its binding's row
// ([sessions]): NULL for a binding written by an older build, cleared
// when another owner binds an expired id, deleted with the row.

// DescribeSession stores desc with the live binding of sessionID to owner.
func (s *sessions) DescribeSession(ctx context.Context, sessionID, owner string, desc []byte) error {
	if s.closed.Load() {
		return task.ErrClosed
	}
	if desc == nil {
		desc = []byte{} // stored, not NULL: NULL is an older build's binding
	}
	wctx, cancel := s.writeContext(ctx)
	defer cancel()
	tag, err := s.pool.Exec(wctx, s.q.describe, sessionHash(sessionID), ownerHash(owner), desc, time.Now().UnixNano())
	if err != nil {
		return s.fail("describing a session", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	_, err = s.SessionDescription(ctx, sessionID, owner) // ErrForeign or ErrNotFound
	if err == nil {
		err = task.ErrNotFound // bound to owner again just now: as if not yet
	}
	return err
}

// SessionDescription returns the description stored with the live binding
// of sessionID to owner (nil for none).
func (s *sessions) SessionDescription(ctx context.Context, sessionID, owner string) ([]byte, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	var bound, desc []byte
	err := s.pool.QueryRow(ctx, s.q.description, sessionHash(sessionID), time.Now().UnixNano()).Scan(&bound, &desc)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, task.ErrNotFound
	case err != nil:
		return nil, s.fail("reading a session's description", err)
	case !bytes.Equal(bound, ownerHash(owner)):
		return nil, task.ErrForeign
	}
	return desc, nil
}

// The seam is the task.SessionDescriber part of the store contract on its own.
var _ task.SessionDescriber = (*sessions)(nil)
