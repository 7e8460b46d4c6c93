package pgstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// unavailable reports an error of reaching the database rather than of the
// statement: no connection could be made, the connection broke, the
// server is shutting down or starting, or the store's own deadline passed
// with no answer. The same call may succeed once the database is back, so
// the store reports it as task.ErrUnavailable and the gateway answers it
// as retryable.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		return unavailableCode(pgErr.Code)
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, context.DeadlineExceeded), pgconn.Timeout(err), pgconn.SafeToRetry(err):
		return true
	}
	// pgx reports a connection closed under it, or the pool's, in words.
	msg := err.Error()
	for _, s := range []string{"conn closed", "closed pool", "connection reset", "broken pipe", "unexpected EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// unavailableCode reports the SQLSTATEs of a server that cannot serve now:
// connection exceptions (class 08), an administrator's or a crash's
// shutdown, a server still starting, too many connections, and a server
// out of resources (disk full, out of memory: class 53).
func unavailableCode(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "53"):
		return true
	}
	switch code {
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	}
	return false
}
