package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrServerTooOld is the error of a server older than the oldest this store
// runs on (PostgreSQL 12).
var ErrServerTooOld = errors.New("server too old")

// Check connects once to the database of dsn, reads the server's version
// and disconnects: it creates, changes and locks nothing, so a
// configuration can be checked (caddy validate, a reload) without side
// effects. Its error, like Open's, tells with Permanent whether trying
// again can help. ctx bounds the attempt.
func Check(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("pgstore: parsing the DSN: %w", err) // pgx redacts the password from its message
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pgstore: connecting: %w", err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var num int
	var version string
	if err := conn.QueryRow(ctx, serverVersionQuery).Scan(&num, &version); err != nil {
		return fmt.Errorf("pgstore: reading the server's version: %w", err)
	}
	return serverSupported(num, version)
}

// Permanent reports whether err, from Check or Open, will come again on
// every try until an operator changes the configuration or the server, and
// if so what to do. A database that does not exist, credentials the server
// refuses, a user without the right to connect, a server older than 12 and
// a DSN that does not parse are permanent. Everything else (a server that
// refuses connections, is starting or shutting down, has no connection
// slot free, does not answer in time) may pass, and is not.
func Permanent(err error) (fix string, permanent bool) {
	var pgErr *pgconn.PgError
	var parseErr *pgconn.ParseConfigError
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, ErrServerTooOld):
		return "upgrade PostgreSQL to version 12 or later", true
	case errors.As(err, &parseErr):
		return "correct the DSN (a postgres:// URL or libpq key=value pairs)", true
	case errors.As(err, &pgErr):
		switch pgErr.Code {
		case "3D000": // invalid_catalog_name
			return "create the database (CREATE DATABASE … OWNER …) or correct the database name in the DSN", true
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return "correct the user or password in the DSN (or the server's pg_hba.conf)", true
		case "42501": // insufficient_privilege: no CONNECT on the database
			return "grant the user CONNECT on the database", true
		}
	}
	return "", false
}
