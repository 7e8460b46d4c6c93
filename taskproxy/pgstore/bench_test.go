package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/storetest"
)

var benchSchemas atomic.Int64

func BenchmarkPostgres(b *testing.B) {
	schema := fmt.Sprintf("b%d_%d", os.Getpid(), benchSchemas.Add(1))
	defer dropSchema(b, schema)
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema, MaxConns: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.Bench(b, s)
}

func BenchmarkPostgresLookups(b *testing.B) {
	schema := fmt.Sprintf("b%d_%d", os.Getpid(), benchSchemas.Add(1))
	defer dropSchema(b, schema)
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchLookups(b, s)
}

// dropSchema removes a benchmark's schema; a failure is reported, since a
// schema left behind weighs on every later run against the server.
func dropSchema(b *testing.B, schema string) {
	b.Helper()
	if _, err := admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		b.Errorf("dropping schema %s: %v", schema, err)
	}
}
