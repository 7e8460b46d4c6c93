package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrServerTooOld is the error of a server older than the oldest this store
// runs on (PostgreSQL 12).
var ErrServerTooOld = errors.New("server too old")

// ErrSchemaPrivilege is the error of a user that may not create the
// store's schema, or its tables in it.
var ErrSchemaPrivilege = errors.New("insufficient privilege for the schema")

// ErrSchemaNewer is the error of a schema migrated by a newer gateway than
// this one; its text is what to do.
var ErrSchemaNewer = errors.New("upgrade the gateway")

// Check connects once to the database of dsn; reads the server's version,
// whether the user may create schema (empty: DefaultSchema) or, when it
// exists, its tables, and the version a gateway migrated it to; and
// disconnects. It creates, changes and locks nothing, so a configuration can be checked (caddy validate, a reload)
// without side effects. Its error, like Open's, tells with Permanent
// whether trying again can help. ctx bounds the attempt.
func Check(ctx context.Context, dsn, schema string) error {
	if schema == "" {
		schema = DefaultSchema
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("pgstore: parsing the DSN: %w", err) // pgx redacts the password from its message
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pgstore: connecting: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}()
	var num int
	var version string
	if err := conn.QueryRow(ctx, serverVersionQuery).Scan(&num, &version); err != nil {
		return fmt.Errorf("pgstore: reading the server's version: %w", err)
	}
	if err := serverSupported(num, version); err != nil {
		return err
	}
	return checkSchema(ctx, conn, schema)
}

// checkSchema reports a user that may not create schema (CREATE on the
// database) when it does not exist, or may not use it and create tables in
// it (USAGE and CREATE on it) when it does: Open would fail on it at every
// start.
func checkSchema(ctx context.Context, conn *pgx.Conn, schema string) error {
	var exists, allowed bool
	err := conn.QueryRow(ctx, `SELECT n.oid IS NOT NULL,
		CASE WHEN n.oid IS NULL THEN has_database_privilege(current_database(), 'CREATE')
		ELSE has_schema_privilege(n.oid, 'USAGE') AND has_schema_privilege(n.oid, 'CREATE') END
		FROM (SELECT 1) one LEFT JOIN pg_namespace n ON n.nspname = $1`, schema).Scan(&exists, &allowed)
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: reading the privileges on schema %s: %w", pgx.Identifier{schema}.Sanitize(), err)
	case allowed && exists:
		return checkSchemaVersion(ctx, conn, schema)
	case allowed:
		return nil
	case exists:
		return fmt.Errorf("pgstore: the user may not use schema %s and create tables in it: %w", pgx.Identifier{schema}.Sanitize(), ErrSchemaPrivilege)
	}
	return fmt.Errorf("pgstore: schema %s does not exist and the user may not create it: %w", pgx.Identifier{schema}.Sanitize(), ErrSchemaPrivilege)
}

// Permanent reports whether err, from Check or Open, will come again on
// every try until an operator changes the configuration or the server, and
// if so what to do. A database that does not exist, credentials the server
// refuses, a user without the right to connect or to create the schema, a
// server older than 12 and a DSN that does not parse are permanent. Everything else (a server that
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
	case errors.Is(err, ErrSchemaNewer):
		return "upgrade the gateway to the version that migrated the schema, or name another schema", true
	case errors.Is(err, ErrSchemaPrivilege):
		return "create the schema for the user (CREATE SCHEMA … AUTHORIZATION …), or GRANT CREATE ON DATABASE … TO the user", true
	case errors.As(err, &parseErr):
		return "correct the DSN (a postgres:// URL or libpq key=value pairs)", true
	case errors.As(err, &pgErr):
		switch pgErr.Code {
		case "3D000": // invalid_catalog_name
			return "create the database (CREATE DATABASE … OWNER …) or correct the database name in the DSN", true
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return "correct the user or password in the DSN (or the server's pg_hba.conf)", true
		case "42501": // insufficient_privilege: no CONNECT on the database, no CREATE for the schema
			return "grant the user the privilege it lacks (CONNECT on the database; CREATE on the database, or a schema of its own)", true
		}
	}
	return "", false
}

// checkSchemaVersion reports a schema a newer gateway migrated, which Open
// refuses.
func checkSchemaVersion(ctx context.Context, conn *pgx.Conn, schema string) error {
	table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
	var migrated bool
	if err := conn.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&migrated); err != nil {
		return fmt.Errorf("pgstore: looking for %s: %w", table, err)
	}
	if !migrated {
		return nil
	}
	var version int
	if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+table).Scan(&version); err != nil {
		return fmt.Errorf("pgstore: reading the version of schema %s: %w", pgx.Identifier{schema}.Sanitize(), err)
	}
	if version > SchemaVersion {
		return fmt.Errorf("pgstore: schema %s is at version %d, newer than this gateway knows (%d): %w",
			pgx.Identifier{schema}.Sanitize(), version, SchemaVersion, ErrSchemaNewer)
	}
	return nil
}
