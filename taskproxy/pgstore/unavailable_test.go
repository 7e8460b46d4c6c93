package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Errors of reaching the database are unavailability; errors of the
// statement are not.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"connection failure", fmt.Errorf("x: %w", &pgconn.PgError{Code: "08006"}), true},
		{"disk full", &pgconn.PgError{Code: "53100"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false},
		{"EOF", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"store deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{"closed connection", errors.New("conn closed"), true},
		{"a statement's error", errors.New("syntax error at or near"), false},
	} {
		if got := unavailable(tc.err); got != tc.want {
			t.Errorf("%s: unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// A read runs again only when its connection broke under it: not when no
// connection could be made, nor when the statement itself failed.
func TestLostConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"admin shutdown", fmt.Errorf("reading: %w", &pgconn.PgError{Code: "57P01"}), true},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"closed connection", errors.New("conn closed"), true},
		{"EOF", fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, false},
		{"too many connections", &pgconn.PgError{Code: "53300"}, false},
		{"no connection made", &pgconn.ConnectError{}, false},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), false},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
	} {
		if got := lostConnection(tc.err); got != tc.want {
			t.Errorf("%s: lostConnection(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
