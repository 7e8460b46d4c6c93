package pgstore_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// dsnAs returns the test DSN connecting as user.
func dsnAs(t *testing.T, user string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User = url.User(user)
		return u.String()
	}
	return dsn + " user=" + user
}

// A user without CREATE on the database opens a store in a schema a DBA
// created for it and that it owns: the gateway creates its tables there and
// does not insist on creating the schema.
func TestOpenInOwnedSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	role := fmt.Sprintf("gw_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	schema := newSchema(t) // dropped before the role (cleanups run last first)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()+" AUTHORIZATION "+role); err != nil {
		t.Fatal(err)
	}
	var canCreate bool
	if err := admin.QueryRow(ctx, "SELECT has_database_privilege($1, current_database(), 'CREATE')", role).Scan(&canCreate); err != nil || canCreate {
		t.Fatalf("the role may create schemas in the database (%v, %v): the test needs one that may not", canCreate, err)
	}
	s, err := pgstore.Open(ctx, pgstore.Options{DSN: dsnAs(t, role), Schema: schema, MaxConns: 2})
	if err != nil {
		t.Fatalf("Open in the role's own schema: %v", err)
	}
	defer s.Close()
	tk := &task.Task{ID: task.NewTaskID(), Owner: "alice", Status: task.StatusWorking, TTL: 3600e9, Tool: "echo"}
	if err := s.Create(ctx, tk); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := s.Get(ctx, "alice", tk.ID); err != nil {
		t.Fatalf("Get: %v", err)
	}
}
