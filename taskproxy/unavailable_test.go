package taskproxy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// unavailableStore refuses writes of terminal records with
// task.ErrUnavailable while down is set, as a store whose database is down
// or whose disk is full does.
type unavailableStore struct {
	task.Store
	down atomic.Bool
}

func (s *unavailableStore) Update(ctx context.Context, owner, id string, fn func(*task.Task) error) (*task.Task, error) {
	return s.Store.Update(ctx, owner, id, func(rec *task.Task) error {
		if err := fn(rec); err != nil {
			return err
		}
		if rec.Status.Terminal() && s.down.Load() {
			return fmt.Errorf("writing: %w: connection refused", task.ErrUnavailable)
		}
		return nil
	})
}

// An outcome that arrives while the store is unavailable is kept as it is,
// not replaced by a failure, and written once the store is back.
func TestOutcomeKeptWhileStoreUnavailable(t *testing.T) {
	t.Parallel()
	store := &unavailableStore{Store: newMemStore(t)}
	store.down.Store(true)
	g, id := unsettledTask(t, store, `{"content":[{"type":"text","text":"kept"}]}`)
	if n := g.env.Route.SettleUnsettled(context.Background()); n != 0 {
		t.Fatalf("settled %d while the store is unavailable", n)
	}
	if n := g.env.Route.FailOrphans(context.Background(), runtime.Now().Add(time.Hour)); n != 0 {
		t.Errorf("the orphan scan failed %d tasks whose outcome waits to be written", n)
	}
	store.down.Store(false)
	if n := g.env.Route.SettleUnsettled(context.Background()); n != 1 {
		t.Fatalf("settled %d, want 1", n)
	}
	rec, err := g.rt.Store.Get(context.Background(), task.Anonymous, id)
	if err != nil || rec.Status != task.StatusCompleted || !strings.Contains(string(rec.Result), "kept") {
		t.Errorf("task %+v, %v; want completed with the call's own result", rec, err)
	}
}
