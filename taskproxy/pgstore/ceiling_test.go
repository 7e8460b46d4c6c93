package pgstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The ceiling of an owner's finished tasks ([ownerBounds]).

// finishedTask is a completed task of alice's.
func finishedTask() *task.Task {
	x := tk("alice")
	x.Status = task.StatusCompleted
	return x
}

// oldBuild plays a replica of the build before the ceiling: its create
// locks the owner's row with its own upsert and inserts a task; its sweep
// deletes tasks; neither knows the ceiling.
type oldBuild struct {
	t      *testing.T
	schema string
}

func (o oldBuild) create(owner string, status task.Status) {
	o.t.Helper()
	ctx := context.Background()
	h := sha256.Sum256([]byte(owner))
	s := pgx.Identifier{o.schema}.Sanitize()
	err := pgx.BeginFunc(ctx, admin, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO "+s+".owners (owner_hash) VALUES ($1) ON CONFLICT (owner_hash) DO UPDATE SET owner_hash = EXCLUDED.owner_hash", h[:16]); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+s+".tasks (id, owner_hash, status, created_ns, expires_ns, version, record) VALUES ($1, $2, $3, $4, $5, 1, '{}')",
			task.NewTaskID(), h[:16], string(status), time.Now().UnixNano(), time.Now().Add(time.Hour).UnixNano())
		return err
	})
	if err != nil {
		o.t.Fatal(err)
	}
}

func (o oldBuild) sweepAll(owner string) {
	o.t.Helper()
	h := sha256.Sum256([]byte(owner))
	if _, err := admin.Exec(context.Background(), "DELETE FROM "+pgx.Identifier{o.schema}.Sanitize()+".tasks WHERE owner_hash = $1", h[:16]); err != nil {
		o.t.Fatal(err)
	}
}

func TestFinishedCeiling(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	limits := task.Limits{MaxActive: 100, MaxFinished: 5}
	cases := []struct {
		name string
		run  func(t *testing.T, s *pgstore.Store, old oldBuild)
	}{
		{"creates under the ceiling count nothing", func(t *testing.T, s *pgstore.Store, _ oldBuild) {
			wide := task.Limits{MaxFinished: 1000}
			if err := s.CreateWithinLimits(ctx, finishedTask(), wide); err != nil {
				t.Fatal(err)
			}
			walks := pgstore.FinishedWalks(s)
			for range 10 {
				if err := s.CreateWithinLimits(ctx, finishedTask(), wide); err != nil {
					t.Fatal(err)
				}
				if err := s.CreateWithinLimits(ctx, tk("alice"), wide); err != nil {
					t.Fatal(err)
				}
			}
			if n := pgstore.FinishedWalks(s) - walks; n != 0 {
				t.Errorf("20 creates far under the bound counted the finished tasks %d times, want 0", n)
			}
		}},
		{"the bound stays exact once the ceiling reaches it", func(t *testing.T, s *pgstore.Store, _ oldBuild) {
			for range 3 {
				if err := s.CreateWithinLimits(ctx, tk("alice"), limits); err != nil { // active: in the ceiling, not in the count
					t.Fatal(err)
				}
			}
			for i := range 7 {
				err := s.CreateWithinLimits(ctx, finishedTask(), limits)
				if i < 5 && err != nil || i >= 5 && !errors.Is(err, task.ErrQuotaExceeded) {
					t.Errorf("finished create %d with a bound of 5: %v", i+1, err)
				}
			}
		}},
		{"an older build's creates are not missed", func(t *testing.T, s *pgstore.Store, old oldBuild) {
			for range 2 {
				if err := s.CreateWithinLimits(ctx, finishedTask(), limits); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 { // 5 finished now; the ceiling this build wrote says 2
				old.create("alice", task.StatusCompleted)
			}
			if err := s.CreateWithinLimits(ctx, finishedTask(), limits); !errors.Is(err, task.ErrQuotaExceeded) {
				t.Errorf("create at the bound after an older build's creates: %v, want ErrQuotaExceeded", err)
			}
		}},
		{"an older build's sweep does not refuse the owner for ever", func(t *testing.T, s *pgstore.Store, old oldBuild) {
			for range 5 {
				if err := s.CreateWithinLimits(ctx, finishedTask(), limits); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CreateWithinLimits(ctx, finishedTask(), limits); !errors.Is(err, task.ErrQuotaExceeded) {
				t.Fatalf("create at the bound: %v", err)
			}
			old.sweepAll("alice") // the ceiling still says 5
			for i := range 5 {
				if err := s.CreateWithinLimits(ctx, finishedTask(), limits); err != nil {
					t.Errorf("create %d after the sweep emptied the owner: %v", i+1, err)
				}
			}
		}},
		{"a create without a bound adds to the ceiling", func(t *testing.T, s *pgstore.Store, _ oldBuild) {
			if err := s.CreateWithinLimits(ctx, finishedTask(), limits); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				if err := s.Create(ctx, finishedTask()); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CreateWithinLimits(ctx, finishedTask(), limits); !errors.Is(err, task.ErrQuotaExceeded) {
				t.Errorf("bounded create after unbounded ones reached the bound: %v", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			schema := newSchema(t)
			c.run(t, open(t, schema), oldBuild{t: t, schema: schema})
		})
	}
}
