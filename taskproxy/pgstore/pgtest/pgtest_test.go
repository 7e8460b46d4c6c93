package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// Without server binaries Start fails with an error that says what to do.
func TestStartWithoutBinaries(t *testing.T) {
	t.Setenv(pgtest.EnvDSN, "")
	_, err := pgtest.Start(filepath.Join(t.TempDir(), "no-such-bin"))
	if err == nil || !strings.Contains(err.Error(), "no initdb in") {
		t.Errorf("Start without binaries: %v", err)
	}
}

// A throwaway cluster answers queries, and Stop stops it and removes
// every file it made. With MCP_TASKS_TEST_DSN set, Start hands out that
// server and Stop leaves it alone.
func TestStartStop(t *testing.T) {
	t.Parallel()
	if env := os.Getenv(pgtest.EnvDSN); env != "" {
		srv, err := pgtest.Start("")
		if err != nil || srv.DSN != env {
			t.Fatalf("Start with %s set: %+v, %v", pgtest.EnvDSN, srv, err)
		}
		srv.Stop()
		return
	}
	srv, err := pgtest.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil || db != "mcp_tasks_test" {
		t.Errorf("current_database() = %q, %v", db, err)
	}
	_ = conn.Close(ctx)
	dir := hostOf(srv.DSN)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the cluster directory %s: %v", dir, err)
	}
	srv.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the cluster directory is still there after Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, srv.DSN); err == nil {
		t.Error("the server still answers after Stop")
	}
}

func hostOf(dsn string) string {
	for f := range strings.FieldsSeq(dsn) {
		if v, ok := strings.CutPrefix(f, "host="); ok {
			return v
		}
	}
	return ""
}
