package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A read whose connection was lost before it answered (the server's backend
// terminated by an administrator or a restart, the socket closed) runs once
// more, on a connection that answers a ping, before its error reaches a
// client: the pool checks only connections idle for a second or more, so
// after pg_terminate_backend the next read would otherwise get a dead one.
// Only reads do: they change nothing, so running one twice is the same as
// running it once. Writes keep their own semantics (a write whose outcome
// is unknown is not sent again behind the caller's back).

// reader is what a read needs of the pool or of one of its connections.
type reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readAgain runs read on the pool and, when it failed on a lost
// connection, once more on a fresh one.
func readAgain[T any](ctx context.Context, db *database, read func(reader) (T, error)) (T, error) {
	v, err := read(db.pool)
	if err == nil || !lostConnection(err) || ctx.Err() != nil || db.closed.Load() {
		return v, err
	}
	conn, cerr := db.liveConn(ctx)
	if cerr != nil {
		return v, err
	}
	defer conn.Release()
	return read(conn)
}

// liveConn acquires a connection that answers a ping. A dead one the pool
// hands out fails the ping, is closed and goes back to be destroyed; after
// as many tries as the pool has connections, a new one is made.
func (db *database) liveConn(ctx context.Context) (*pgxpool.Conn, error) {
	tries := int(db.pool.Stat().MaxConns()) + 1
	var err error
	for range tries {
		var conn *pgxpool.Conn
		if conn, err = db.pool.Acquire(ctx); err != nil {
			return nil, err
		}
		if err = conn.Ping(ctx); err == nil {
			return conn, nil
		}
		conn.Release()
		if !lostConnection(err) {
			return nil, err
		}
	}
	return nil, err
}

// lostConnection reports an error of a connection that broke under a
// statement: the server ended the backend (57P01 admin_shutdown, 57P02
// crash_shutdown), a connection exception (class 08), or the socket closed
// or ended. A connection that could not be made at all is not one: another
// try would wait as long again for the same answer.
func lostConnection(err error) bool {
	var connectErr *pgconn.ConnectError
	var pgErr *pgconn.PgError
	switch {
	case err == nil, errors.As(err, &connectErr), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &pgErr):
		return pgErr.Code == "57P01" || pgErr.Code == "57P02" || strings.HasPrefix(pgErr.Code, "08")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return true
	}
	msg := err.Error()
	for _, s := range []string{"conn closed", "unexpected EOF", "connection reset", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
