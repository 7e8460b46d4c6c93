package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// One PostgreSQL server for the package's tests: a throwaway cluster
// (pgtest), started by the first test that needs it and stopped by TestMain
// when the package's tests are done, or the server of MCP_TASKS_TEST_DSN.
// Each test gets a database of its own, dropped after it.
var sharedPostgres struct {
	once sync.Once
	srv  *pgtest.Server
	err  error
}

// testPostgres returns the package's PostgreSQL server. Without one the test
// fails; it is never skipped.
func testPostgres(t testing.TB) *pgtest.Server {
	t.Helper()
	sharedPostgres.once.Do(func() { sharedPostgres.srv, sharedPostgres.err = pgtest.Start("") })
	if sharedPostgres.err != nil {
		t.Fatalf("PostgreSQL for the end-to-end tests: %v", sharedPostgres.err)
	}
	return sharedPostgres.srv
}

// stopTestPostgres stops the cluster testPostgres started, if it did.
func stopTestPostgres() {
	if sharedPostgres.srv != nil {
		sharedPostgres.srv.Stop()
	}
}

var testDatabases atomic.Int64

// testDatabase creates a database for the test on the package's server and
// returns its DSN and a connection to it as the test's administrator (for
// looking at what the gateway did). Both go at the end of the test.
func testDatabase(t testing.TB) (string, *pgx.Conn) {
	t.Helper()
	srv := testPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	name := fmt.Sprintf("e2e_%d_%d", os.Getpid(), testDatabases.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	dsn := withDatabase(t, srv.DSN, name)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = conn.Close(ctx)
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = admin.Close(ctx)
	})
	return dsn, conn
}

// withDatabase returns dsn naming database name instead of its own.
func withDatabase(t testing.TB, dsn, name string) string {
	t.Helper()
	if isURLDSN(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("parsing the test DSN: %v", err)
		}
		u.Path = "/" + name
		return u.String()
	}
	return dsn + " dbname=" + name // the last setting of a key wins
}

// withDSNParam returns dsn with key set to value, in either form.
func withDSNParam(t testing.TB, dsn, key, value string) string {
	t.Helper()
	if isURLDSN(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("parsing the test DSN: %v", err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

func isURLDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// postgresServerExec runs sql on the package's server, connected to its
// own database (for statements about a test's database, such as ALTER
// DATABASE, which PostgreSQL refuses from inside it).
func postgresServerExec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, testPostgres(t).DSN)
	if err != nil {
		t.Fatalf("connecting to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
