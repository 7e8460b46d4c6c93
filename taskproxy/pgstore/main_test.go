package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// One throwaway cluster for the package's tests (or the server of
// MCP_TASKS_TEST_DSN); every test works in schemas of its own. Without
// PostgreSQL the tests fail, they are never skipped.

var (
	dsn   string
	admin *pgxpool.Pool
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	srv, err := pgtest.Start("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the PostgreSQL store tests need a PostgreSQL server:", err)
		return 1
	}
	defer srv.Stop()
	dsn = srv.DSN
	admin, err = pgxpool.New(context.Background(), dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: connecting to the test server:", err)
		return 1
	}
	defer admin.Close()
	return m.Run()
}

var schemas atomic.Int64

// newSchema returns a schema name no other test uses, dropped after the
// test.
func newSchema(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%d", os.Getpid(), schemas.Add(1))
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return name
}

// open opens a store on schema, closed after the test.
func open(t *testing.T, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
