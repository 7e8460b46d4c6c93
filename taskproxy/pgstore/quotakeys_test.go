package pgstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A schema of version 5, written before quota keys (its anonymous callers'
// tasks all under the one owner), migrates with its counts as they were:
// its rows count under their owner, a task with a quota key beside them
// under its key, and an old task ending moves from its owner's active
// count to its finished one.
func TestSchema5RowsCountUnderTheirOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+quoted+"; CREATE TABLE "+quoted+
		".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 5; v++ {
		if _, err := admin.Exec(ctx, strings.ReplaceAll(pgstore.Migrations[v], "{s}", quoted)); err != nil {
			t.Fatalf("migration %d: %v", v, err)
		}
		if _, err := admin.Exec(ctx, "INSERT INTO "+quoted+".schema_migrations (version) VALUES ($1)", v); err != nil {
			t.Fatal(err)
		}
	}
	const anon = task.Anonymous
	now := time.Now().UTC()
	working := []*task.Task{tk(anon), tk(anon)}
	done := tk(anon)
	done.Status = task.StatusCompleted
	sum := sha256.Sum256([]byte(anon))
	for _, x := range append(working, done) {
		record, err := task.EncodeRecord(x)
		if err != nil {
			t.Fatal(err)
		}
		summary, err := task.EncodeRecord(x.Summary())
		if err != nil {
			t.Fatal(err)
		}
		// The row as version 5 wrote it: no quota_hash column yet.
		if _, err := admin.Exec(ctx, "INSERT INTO "+quoted+`.tasks (id, owner_hash, status, created_ns, expires_ns, version, record, summary)
			VALUES ($1, $2, $3, $4, $5, 1, $6, $7)`, x.ID, sum[:16], string(x.Status), x.CreatedAt.UnixNano(), x.ExpiresAt().UnixNano(), record, summary); err != nil {
			t.Fatal(err)
		}
	}

	s := open(t, schema)
	if n, err := s.CountActive(ctx, anon); err != nil || n != 2 {
		t.Fatalf("CountActive(%s) = %d, %v; want the 2 written before quota keys", anon, n, err)
	}
	limits := task.Limits{MaxActive: 2, MaxFinished: 1}
	keyed := func(quota string, status task.Status) *task.Task {
		x := tk(anon)
		x.QuotaKey, x.Status = quota, status
		return x
	}
	var q *task.QuotaError
	steps := []struct {
		name  string
		x     *task.Task
		check func(error) bool
	}{
		{"the owner at its active bound", keyed("", task.StatusWorking), func(err error) bool { return errors.As(err, &q) && !q.Finished }},
		{"the owner at its finished bound", keyed("", task.StatusFailed), func(err error) bool { return errors.As(err, &q) && q.Finished }},
		{"a quota key beside them", keyed("ip:192.0.2.1", task.StatusWorking), func(err error) bool { return err == nil }},
		{"a quota key's finished task", keyed("ip:192.0.2.1", task.StatusFailed), func(err error) bool { return err == nil }},
	}
	for _, st := range steps {
		if err := s.CreateWithinLimits(ctx, st.x, limits); !st.check(err) {
			t.Errorf("%s: err = %v", st.name, err)
		}
	}
	if _, err := s.Update(ctx, anon, working[0].ID, func(r *task.Task) error { return r.SetStatus(task.StatusCancelled, "", now) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		quota string
		want  int
	}{{anon, 1}, {"ip:192.0.2.1", 1}} {
		if n, err := s.CountActive(ctx, c.quota); err != nil || n != c.want {
			t.Errorf("after an old task ended: CountActive(%s) = %d, %v; want %d", c.quota, n, err, c.want)
		}
	}
	if err := s.CreateWithinLimits(ctx, keyed("", task.StatusWorking), task.Limits{MaxActive: 2}); err != nil {
		t.Errorf("the owner's active place freed by the old task's end: %v", err)
	}
}
