package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A finished record enters the cache only once its write committed: a
// COMMIT that fails (here a deferred constraint trigger; in production a
// deadline, a dropped connection) on the single-update path, which locks
// the row, must not leave the cache serving a "completed" task the
// database still has as working (it was put in before the COMMIT, and
// served until the task's ttl).
func TestFinishedCacheOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openWith(t, pgstore.Options{Schema: schema})
	ctx := context.Background()
	x := tk("alice")
	if err := s.CreateWithinLimits(ctx, x, task.Limits{}); err != nil {
		t.Fatal(err)
	}
	sch := pgx.Identifier{schema}.Sanitize()
	for _, q := range []string{
		`CREATE FUNCTION ` + sch + `.fail_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'simulated commit failure'; END $$`,
		`CREATE CONSTRAINT TRIGGER fail_commit AFTER UPDATE ON ` + sch + `.tasks DEFERRABLE INITIALLY DEFERRED
			FOR EACH ROW WHEN (NEW.status = 'completed') EXECUTE FUNCTION ` + sch + `.fail_commit()`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// The first 6 runs of fn (3 group rounds, 3 optimistic tries) lose their
	// compare-and-set to a concurrent writer; the 7th runs on the locked path.
	var calls atomic.Int32
	_, err := s.Update(ctx, x.Owner, x.ID, func(t2 *task.Task) error {
		if calls.Add(1) <= 6 {
			if _, err := admin.Exec(ctx, `UPDATE `+sch+`.tasks SET version = version + 1 WHERE id = $1`, x.ID); err != nil {
				return err
			}
		}
		t2.Status = task.StatusCompleted
		return nil
	})
	if err == nil {
		t.Fatal("expected the commit to fail")
	}
	var status string
	if err := admin.QueryRow(ctx, `SELECT status FROM `+sch+`.tasks WHERE id = $1`, x.ID).Scan(&status); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, x.Owner, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != task.Status(status) {
		t.Errorf("Get after a failed commit: %s, the database has %s (the cache holds an uncommitted record)", got.Status, status)
	}
}

// The ceiling is trusted only while the owner row's xmin is the
// transaction that wrote it. Every build locks the owner's row for its
// quota with an upsert (ON CONFLICT DO UPDATE), which writes a new row
// version: tasks an older build inserts under that lock make the ceiling
// distrusted, and the bound holds. (A lock that does not write the row,
// SELECT ... FOR UPDATE, would leave xmin as it was: this test keeps
// lockOwner an upsert.)
func TestCeilingDistrustedAfterAnotherBuildsQuotaLock(t *testing.T) {
	t.Parallel()
	for _, lock := range []string{"upsert"} {
		t.Run(lock, func(t *testing.T) {
			t.Parallel()
			schema := newSchema(t)
			s := openWith(t, pgstore.Options{Schema: schema})
			ctx := context.Background()
			sch := pgx.Identifier{schema}.Sanitize()
			limits := task.Limits{MaxFinished: 5}
			done := func() *task.Task { x := tk("alice"); x.Status = task.StatusCompleted; return x }
			first := done()
			for _, x := range []*task.Task{first, done()} { // the second trusts and writes the ceiling
				if err := s.CreateWithinLimits(ctx, x, limits); err != nil {
					t.Fatal(err)
				}
			}
			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			q := `SELECT 1 FROM ` + sch + `.owners WHERE owner_hash = (SELECT owner_hash FROM ` + sch + `.tasks WHERE id = $1) FOR UPDATE`
			if lock == "upsert" {
				q = `INSERT INTO ` + sch + `.owners (owner_hash) SELECT owner_hash FROM ` + sch + `.tasks WHERE id = $1
					ON CONFLICT (owner_hash) DO UPDATE SET owner_hash = EXCLUDED.owner_hash`
			}
			if _, err := tx.Exec(ctx, q, first.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+sch+`.tasks (id, owner_hash, status, created_ns, expires_ns, version, record, summary)
				SELECT id || i, owner_hash, status, created_ns, expires_ns, version, record, summary FROM `+sch+`.tasks, generate_series(1, 3) i WHERE id = $1`, first.ID); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			// 5 finished now: the bound is reached.
			err = s.CreateWithinLimits(ctx, done(), limits)
			var n int
			_ = admin.QueryRow(ctx, `SELECT count(*) FROM `+sch+`.tasks`).Scan(&n)
			if err == nil {
				t.Errorf("create accepted with %d finished tasks kept, bound 5", n)
			}
		})
	}
}

// A group of updates does not wait for a task row locked elsewhere: the
// others of its round are written (they used to wait with it until the
// write deadline, then all fail as unavailable), and the held one is
// written on its own once the row is free.
func TestUpdateGroupSkipsAHeldRow(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openWith(t, pgstore.Options{Schema: schema, WriteTimeout: 2 * time.Second})
	ctx := context.Background()
	x, y := tk("alice"), tk("bob")
	for _, k := range []*task.Task{x, y} {
		if err := s.CreateWithinLimits(ctx, k, task.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema}.Sanitize()+`.tasks WHERE id = $1 FOR UPDATE`, x.ID); err != nil {
		t.Fatal(err)
	}
	set := func(t2 *task.Task) error { t2.StatusMessage = "progress"; return nil }
	held, release := pgstore.HoldUpdates(s)
	xErr := make(chan error, 1)
	go func() { _, err := s.Update(ctx, x.Owner, x.ID, set); xErr <- err }()
	<-held
	yErr := make(chan error, 1)
	go func() { _, err := s.Update(ctx, y.Owner, y.ID, set); yErr <- err }()
	waitFor(t, func() bool { return pgstore.QueuedUpdates(s) == 1 })
	release() // one round: alice's and bob's updates
	if err := <-yErr; err != nil {
		t.Errorf("bob's update (his row free) failed beside alice's held row: %v", err)
	}
	_ = tx.Rollback(ctx) // alice's row is free: her update is written on its own
	if err := <-xErr; err != nil {
		t.Errorf("alice's update, once her row was free: %v", err)
	}
}
