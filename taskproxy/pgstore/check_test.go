package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
)

// Check connects to the real server and tells errors that come back on
// every try (Permanent, with what to do) from those that may pass.
func TestCheckClassifies(t *testing.T) {
	t.Parallel()
	param := func(k, v string) string {
		if strings.Contains(dsn, "://") {
			t.Skip("the cases build key=value DSNs; MCP_TASKS_TEST_DSN is a URL")
		}
		return dsn + " " + k + "=" + v // the last setting of a key wins
	}
	for _, c := range []struct {
		name      string
		dsn       func() string
		permanent bool
		fix       string // part of what Permanent says to do
	}{
		{"the test database", func() string { return dsn }, false, ""},
		{"a database that does not exist", func() string { return param("dbname", "no_such_db_x") }, true, "create the database"},
		{"a role the server refuses", func() string { return param("user", "no_such_role_x") }, true, "user or password"},
		{"a DSN that does not parse", func() string { return "host=x port=notaport" }, true, "correct the DSN"},
		{"nobody listening", func() string { return param("host", t.TempDir()) }, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := pgstore.Check(ctx, c.dsn())
			fix, permanent := pgstore.Permanent(err)
			if c.name == "the test database" {
				if err != nil {
					t.Fatalf("Check of the test database: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check succeeded")
			}
			if permanent != c.permanent || !strings.Contains(fix, c.fix) {
				t.Errorf("Permanent(%v) = %q, %v; want %v with %q", err, fix, permanent, c.permanent, c.fix)
			}
		})
	}
	old := pgstore.ServerSupported(110000, "11.22")
	if fix, permanent := pgstore.Permanent(old); !permanent || !strings.Contains(fix, "upgrade") {
		t.Errorf("Permanent(%v) = %q, %v; want an upgrade", old, fix, permanent)
	}
}
