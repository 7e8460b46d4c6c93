package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The group statements that look rows up by arrays of ids run generic
// plans: left to choose, the server planned them anew on every
// execution, which cost it several times the execution. The plans are
// index scans (by id; the counts of a quota's tasks by its index) even
// when made on a new, empty table and kept while it grows, and the setting
// ends with the statements.
func TestGroupLookupsUseGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var version int
	if err := admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version < 140000 {
		t.Skip("pg_prepared_statements counts plans from PostgreSQL 14 on")
	}
	schema := newSchema(t)
	s := openWith(t, pgstore.Options{Schema: schema, MaxConns: 1}) // every statement on one connection
	const n = 12                                                   // past the five custom plans the server makes before it compares
	for range n {
		x := tk("alice")
		if err := s.CreateWithinLimits(ctx, x, task.Limits{MaxActive: 100, MaxFinished: 100}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Update(ctx, x.Owner, x.ID, func(t *task.Task) error { return t.SetStatus(task.StatusCompleted, "", time.Now()) }); err != nil {
			t.Fatal(err)
		}
	}
	if settings, err := pgstore.PlanSettings(ctx, s); err != nil || settings != "plan_cache_mode=auto enable_seqscan=on" {
		t.Errorf("after the groups: %q (%v), want the server's own settings", settings, err)
	}
	// The table grows far past what the plans were made on, with no
	// ANALYZE: the cached plans stay.
	if _, err := admin.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+`.tasks (id, owner_hash, status, created_ns, expires_ns, version, record)
		SELECT 'grown' || i, '\x00', 'completed', i, 9000000000000000000, 1, '{}' FROM generate_series(1, 20000) i`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql, args string
		indexes         []string
	}{
		{"the ids of a group of creates (existingIDs)", ".tasks WHERE id = ANY($1::text[])", `'{a,b}'`, []string{"tasks_pkey"}},
		{"the rows of a group of updates (getOwnMany)", "(t.id, t.owner_hash) IN (SELECT * FROM unnest(", `'{a,b}', '{"\\x00","\\x01"}'`, []string{"tasks_pkey"}},
		{"the counts of a group's quotas (countOwners)", "AS o(h, ma, mf, since, n)", `'{"\\x00"}', '{5}', '{5}', '{0}'`, []string{"tasks_active_quota", "tasks_finished_quota"}},
	} {
		generic, custom, err := pgstore.PreparedPlans(ctx, s, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		if generic < n || custom > 0 {
			t.Errorf("%s: %d generic plans and %d custom plans in %d executions, want every one generic", c.name, generic, custom, n)
		}
		plan, err := pgstore.ExplainGeneric(ctx, s, c.sql, c.args)
		if err != nil {
			t.Fatal(err)
		}
		for _, index := range c.indexes {
			if !strings.Contains(plan, index) || strings.Contains(plan, "Seq Scan on tasks") {
				t.Errorf("%s: the cached generic plan does not look tasks up by %s:\n%s", c.name, index, plan)
			}
		}
	}
}

// A server too old for the store's statements is refused when the store
// opens, by name, not by a failing write later.
func TestServerVersionChecked(t *testing.T) {
	t.Parallel()
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
