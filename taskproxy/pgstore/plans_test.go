package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The group statements that look rows up by arrays of ids run their
// generic plans: left to choose, the server planned them anew on every
// execution, which cost it several times the execution (issue 21).
func TestGroupLookupsUseGenericPlans(t *testing.T) {
	s := openWith(t, pgstore.Options{Schema: newSchema(t), MaxConns: 1}) // every statement on one connection
	ctx := context.Background()
	const n = 12 // past the five custom plans the server makes before it compares
	for range n {
		x := tk("alice")
		if err := s.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, x.Owner, x.ID, func(t *task.Task) error { return t.SetStatus(task.StatusCompleted, "", time.Now()) }); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ name, sql string }{
		{"the ids of a group of creates (existingIDs)", ".tasks WHERE id = ANY($1::text[])"},
		{"the rows of a group of updates (getOwnMany)", "unnest($1::text[], $2::bytea[]) AS k(id, h)"},
	} {
		generic, custom, err := pgstore.PreparedPlans(ctx, s, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		if generic < n || custom > 0 {
			t.Errorf("%s: %d generic plans and %d custom plans in %d executions, want every one generic", c.name, generic, custom, n)
		}
	}
}

// A server too old for the store's statements is refused when the store
// opens, by name, not by a failing write later.
func TestServerVersionChecked(t *testing.T) {
	for _, c := range []struct {
		num     int
		version string
		ok      bool
	}{
		{110022, "11.22", false},
		{120000, "12.0", true},
		{150010, "15.10", true},
	} {
		err := pgstore.ServerSupported(c.num, c.version)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "PostgreSQL "+c.version+" is older than 12")) {
			t.Errorf("server %s: got %v, want ok %v", c.version, err, c.ok)
		}
	}
}
