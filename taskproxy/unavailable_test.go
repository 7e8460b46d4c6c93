package taskproxy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
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

// An error of an unavailable store is answered with 503 and Retry-After,
// whatever status the answer would otherwise have; other errors keep their
// status, and any 503 gets Retry-After.
func TestAnswerStatus(t *testing.T) {
	t.Parallel()
	unavailable := rpcerr.InternalError(zap.NewNop(), "reading the task", fmt.Errorf("reading task x: %w", task.ErrUnavailable))
	other := jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error (ref 0a)")
	// The same words from elsewhere (an upstream's error passed on) are
	// not the gateway's store: only the mark counts.
	lookalike := jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s (ref 0a)", rpcerr.MsgStoreUnavailable)
	for _, tc := range []struct {
		name       string
		status     int
		e          *jsonrpc.Error
		want       int
		retryAfter bool
	}{
		{"unavailable on 2025-11-25", http.StatusOK, unavailable, http.StatusServiceUnavailable, true},
		{"unavailable on 2026-07-28", http.StatusInternalServerError, unavailable, http.StatusServiceUnavailable, true},
		{"another error", http.StatusOK, other, http.StatusOK, false},
		{"the same words, not the store's", http.StatusOK, lookalike, http.StatusOK, false},
		{"a 503 of its own", http.StatusServiceUnavailable, other, http.StatusServiceUnavailable, true},
	} {
		w := httptest.NewRecorder()
		if got := wire.AnswerStatus(w, tc.status, tc.e); got != tc.want || (w.Header().Get("Retry-After") != "") != tc.retryAfter {
			t.Errorf("%s: status %d, Retry-After %q; want %d, Retry-After %v", tc.name, got, w.Header().Get("Retry-After"), tc.want, tc.retryAfter)
		}
	}
}
