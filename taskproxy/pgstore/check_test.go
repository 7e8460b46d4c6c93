package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := pgstore.Check(ctx, c.dsn(), "")
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

// Check finds a user that Open would fail for at every start because it may
// not create the store's schema or its tables, and passes one that owns its
// schema though it may not create schemas.
func TestCheckSchemaPrivileges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	role := fmt.Sprintf("chk_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	owned, usable := newSchema(t), newSchema(t) // dropped before the role
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{owned}.Sanitize()+" AUTHORIZATION "+role); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{usable}.Sanitize()+"; GRANT USAGE ON SCHEMA "+pgx.Identifier{usable}.Sanitize()+" TO "+role); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, schema string
		permanent    bool
	}{
		{"its own schema", owned, false},
		{"a schema it may not create", fmt.Sprintf("missing_%s", role), true},
		{"a schema it may use but not create tables in", usable, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := pgstore.Check(ctx, dsnAs(t, role), c.schema)
			fix, permanent := pgstore.Permanent(err)
			if c.permanent != permanent || (permanent && !strings.Contains(fix, "AUTHORIZATION")) || (!c.permanent && err != nil) {
				t.Errorf("Check: %v; Permanent = %q, %v; want permanent %v", err, fix, permanent, c.permanent)
			}
			if !c.permanent {
				return
			}
			// Open fails on it as well, at every start.
			s, err := pgstore.Open(ctx, pgstore.Options{DSN: dsnAs(t, role), Schema: c.schema, MaxConns: 2})
			if err == nil {
				_ = s.Close()
				t.Error("Open succeeded where Check refused")
			}
		})
	}
}

// A schema a newer gateway migrated is refused by Check as by Open, and
// both errors say it will not pass by itself.
func TestCheckNewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	open(t, schema)
	if err := pgstore.Check(ctx, dsn, schema); err != nil {
		t.Fatalf("Check of a schema this gateway migrated: %v", err)
	}
	if _, err := admin.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+".schema_migrations (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	checkErr := pgstore.Check(ctx, dsn, schema)
	_, openErr := pgstore.Open(ctx, pgstore.Options{DSN: dsn, Schema: schema})
	for what, err := range map[string]error{"Check": checkErr, "Open": openErr} {
		if fix, permanent := pgstore.Permanent(err); !permanent || !strings.Contains(fix, "upgrade the gateway") || !strings.Contains(err.Error(), "version 999") {
			t.Errorf("%s: %v; Permanent = %q, %v; want an upgrade of the gateway", what, err, fix, permanent)
		}
	}
}
