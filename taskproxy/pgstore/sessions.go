package pgstore

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Session bindings: one row per session id (hashed), with its owner (hashed)
// and the wall-clock time it expires at. An expired binding counts as none;
// the sweep deletes it later.

// sessions keeps the session bindings.
type sessions struct {
	*database
}

// BindSession binds sessionID to owner for ttl, unless another owner has a
// live binding of it.
func (s *sessions) BindSession(ctx context.Context, sessionID, owner string, ttl time.Duration) error {
	if s.closed.Load() {
		return task.ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	now := time.Now()
	tag, err := s.pool.Exec(ctx, s.q.bind, sessionHash(sessionID), ownerHash(owner), now.Add(ttl).UnixNano(), now.UnixNano())
	if err != nil {
		return s.fail("binding a session", err)
	}
	if tag.RowsAffected() == 0 {
		return task.ErrForeign
	}
	return nil
}

// CheckSession checks, and with refresh > 0 extends, a session binding.
func (s *sessions) CheckSession(ctx context.Context, sessionID, owner string, refresh time.Duration) error {
	if s.closed.Load() {
		return task.ErrClosed
	}
	now := time.Now()
	if refresh > 0 {
		wctx, cancel := s.writeContext(ctx)
		defer cancel()
		tag, err := s.pool.Exec(wctx, s.q.refresh, sessionHash(sessionID), ownerHash(owner), now.UnixNano(), now.Add(refresh).UnixNano())
		if err != nil {
			return s.fail("refreshing a session binding", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
	}
	var bound []byte
	err := s.pool.QueryRow(ctx, s.q.check, sessionHash(sessionID), now.UnixNano()).Scan(&bound)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return task.ErrNotFound
	case err != nil:
		return s.fail("reading a session binding", err)
	case !bytes.Equal(bound, ownerHash(owner)):
		return task.ErrForeign
	}
	return nil
}

// ForgetSession deletes the binding of sessionID.
func (s *sessions) ForgetSession(ctx context.Context, sessionID string) error {
	if s.closed.Load() {
		return task.ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	if _, err := s.pool.Exec(ctx, s.q.forget, sessionHash(sessionID)); err != nil {
		return s.fail("forgetting a session", err)
	}
	return nil
}

// The seam is the task.SessionBinder half of the store contract on its own.
var _ task.SessionBinder = (*sessions)(nil)
