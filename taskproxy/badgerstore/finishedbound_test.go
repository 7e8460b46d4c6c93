package badgerstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The committer's ceiling of an owner's finished tasks follows every way a
// task comes to count (created terminal, or ending by an update), so the
// bound stays exact though most creates skip the walk; and an owner's
// tasks expiring free room again at the next walk.
func TestFinishedBoundWithCeilings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const limit = 5
	limits := task.Limits{MaxFinished: limit}
	tests := []struct {
		name            string
		createdTerminal int // then active ones ended by an update, to the limit
	}{
		{"all created terminal", limit},
		{"all ended by updates", 0},
		{"mixed", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newMemStore(t)
			now := time.Now()
			for range tt.createdTerminal {
				tk := testTask("alice", now)
				tk.Status = task.StatusCompleted
				if err := s.CreateWithinLimits(ctx, tk, limits); err != nil {
					t.Fatal(err)
				}
			}
			var active []*task.Task
			for range limit - tt.createdTerminal {
				tk := testTask("alice", now)
				if err := s.CreateWithinLimits(ctx, tk, limits); err != nil {
					t.Fatal(err)
				}
				active = append(active, tk)
			}
			for _, tk := range active {
				if _, err := s.Update(ctx, "alice", tk.ID, func(r *task.Task) error { return r.SetStatus(task.StatusCompleted, "", now) }); err != nil {
					t.Fatal(err)
				}
			}
			var q *task.QuotaError
			if err := s.CreateWithinLimits(ctx, testTask("alice", now), limits); !errors.As(err, &q) || !q.Finished {
				t.Fatalf("create at %d finished tasks: %v, want the finished bound", limit, err)
			}
			if err := s.CreateWithinLimits(ctx, testTask("bob", now), limits); err != nil {
				t.Errorf("another owner refused: %v", err)
			}
			// Past their ttl (an hour) and the slack, the finished tasks
			// count no more.
			later := now.Add(2 * time.Hour)
			if err := s.CreateWithinLimits(ctx, testTask("alice", later), limits); err != nil {
				t.Errorf("create after the finished tasks expired: %v", err)
			}
		})
	}
}

// The ceilings are forgotten, not grown without bound, past
// maxFinishedCeilings owners; a forgotten owner walks again.
func TestFinishedCeilingsBounded(t *testing.T) {
	t.Parallel()
	c := finishedCeilings{}
	for i := range maxFinishedCeilings {
		c[strconv.Itoa(i)] = 1
	}
	s := newMemStore(t)
	err := s.db.Update(func(txn *badger.Txn) error {
		_, err := c.walk(txn, "alice", time.Now(), 10)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 1 || c.needsWalk("alice", 10) || !c.needsWalk("bob", 10) {
		t.Errorf("after the bound: %d ceilings, alice walks %v, bob walks %v; want 1, false, true", len(c), c.needsWalk("alice", 10), c.needsWalk("bob", 10))
	}
}
