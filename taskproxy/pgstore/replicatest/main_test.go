// Package replicatest runs several gateways (Runtimes), each with its own
// pgstore.Store, on one PostgreSQL schema in one test process, in front of
// the go-sdk fixture upstream: the replicas of a scaled-out gateway, with
// everything real but the processes.
package replicatest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

var (
	dsn   string
	admin *pgxpool.Pool
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	srv, err := pgtest.Start("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the replica tests need a PostgreSQL server:", err)
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

// newSchema returns a schema no other test uses, dropped after the test.
func newSchema(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("r%d_%d", os.Getpid(), schemas.Add(1))
	tb.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	})
	return name
}
