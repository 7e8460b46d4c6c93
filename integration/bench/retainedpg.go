package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// benchRetainedPostgres is the retained curve on PostgreSQL, for each size
// of cfg.retainedPG: a database per size on a throwaway cluster (pgtest;
// MCP_TASKS_TEST_DSN names an existing server instead), filled through the
// store's API. Disk per task is the database's size over an empty one's.
func benchRetainedPostgres(cfg config) ([]row, error) {
	sizes, err := parseSizes(cfg.retainedPG)
	if err != nil {
		return nil, fmt.Errorf("-retained-postgres: %w", err)
	}
	srv, err := pgtest.Start("")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to the bench server: %w", err)
	}
	defer admin.Close(ctx)
	var names []string
	defer func() {
		for _, name := range names {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		}
	}()
	var empty int64
	if err := admin.QueryRow(ctx, "SELECT pg_database_size('template1')").Scan(&empty); err != nil {
		return nil, fmt.Errorf("reading an empty database's size: %w", err)
	}
	return retainedCurve(cfg, sizes, retainedBackend{name: "PostgreSQL", prepare: func(n int) ([]string, string, int64, error) {
		name := fmt.Sprintf("bench_retained_%d_%d", n, os.Getpid())
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return nil, "", 0, fmt.Errorf("creating database %s: %w", name, err)
		}
		names = append(names, name)
		dsn, err := withDatabase(srv.DSN, name)
		if err != nil {
			return nil, "", 0, err
		}
		s, err := pgstore.Open(ctx, pgstore.Options{DSN: dsn, MaxConns: 16})
		if err != nil {
			return nil, "", 0, fmt.Errorf("opening the store in %s: %w", name, err)
		}
		ids, err := fillStoreWith(s, n)
		s.Close()
		if err != nil {
			return nil, "", 0, err
		}
		// A store that grew over days has been vacuumed and analysed by
		// autovacuum; one filled a moment ago has not, and autovacuum
		// would run during the measurement.
		db, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, "", 0, fmt.Errorf("connecting to %s: %w", name, err)
		}
		_, err = db.Exec(ctx, "VACUUM (ANALYZE)")
		_ = db.Close(ctx)
		if err != nil {
			return nil, "", 0, fmt.Errorf("vacuuming %s: %w", name, err)
		}
		var size int64
		if err := admin.QueryRow(ctx, "SELECT pg_database_size($1)", name).Scan(&size); err != nil {
			return nil, "", 0, fmt.Errorf("reading the size of %s: %w", name, err)
		}
		storage := fmt.Sprintf("storage postgres {\n\t\t\tdsn `%s`\n\t\t\tmax_conns 16\n\t\t}", dsn)
		return ids, storage, size - empty, nil
	}})
}
