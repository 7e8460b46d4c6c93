package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The cache of finished tasks' records ([finishedCache]). A row deleted
// behind the store's back shows what the store answers without asking the
// database.
func TestFinishedCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name      string
		ttl       time.Duration
		finish    bool // ended by an update, else created finished
		sweep     bool // a sweep of this store at the end of the ttl before the read
		owner     string
		wantCache bool
	}{
		{name: "ended by an update", ttl: time.Hour, finish: true, owner: "alice", wantCache: true},
		{name: "created finished", ttl: time.Hour, owner: "alice", wantCache: true},
		{name: "another owner reads the database", ttl: time.Hour, owner: "bob"},
		{name: "near the end of its ttl", ttl: 3 * time.Second, finish: true, owner: "alice"},
		{name: "dropped by this store's sweep", ttl: time.Hour, finish: true, sweep: true, owner: "alice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			schema := newSchema(t)
			s := open(t, schema)
			x := tk("alice")
			x.TTL = c.ttl
			if !c.finish {
				x.Status = task.StatusCompleted
			}
			if err := s.Create(ctx, x); err != nil {
				t.Fatal(err)
			}
			if c.finish {
				if _, err := s.Update(ctx, "alice", x.ID, func(t *task.Task) error { return t.SetStatus(task.StatusCompleted, "", time.Now()) }); err != nil {
					t.Fatal(err)
				}
			}
			if c.sweep {
				if _, err := s.Sweep(ctx, x.ExpiresAt(), 10); err != nil {
					t.Fatal(err)
				}
			} else if _, err := admin.Exec(ctx, "DELETE FROM "+pgx.Identifier{schema}.Sanitize()+".tasks WHERE id = $1", x.ID); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, c.owner, x.ID)
			switch {
			case c.wantCache && (err != nil || got.Status != task.StatusCompleted || got.ID != x.ID):
				t.Errorf("Get of a finished task read before: %+v, %v; want it from the cache", got, err)
			case !c.wantCache && !errors.Is(err, task.ErrNotFound):
				t.Errorf("Get: %+v, %v; want ErrNotFound from the database", got, err)
			}
		})
	}
}
