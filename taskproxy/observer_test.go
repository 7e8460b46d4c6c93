package taskproxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// countingObserver records TaskEnded calls.
type countingObserver struct {
	mu    sync.Mutex
	ended map[task.Status]int
}

func (o *countingObserver) TaskCreated(task.Era) {}
func (o *countingObserver) Refused(string)       {}
func (o *countingObserver) TaskEnded(_ task.Era, s task.Status, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended[s]++
}

// A cancelled task reaches the observer as every other ending does, so the
// ended counter and the duration histogram count it.
func TestCancelCountsAsEnded(t *testing.T) {
	t.Parallel()
	obs := &countingObserver{ended: map[task.Status]int{}}
	g := testGateway(t, Config{Observer: obs})
	// Leased to this process: the recovery pass that the gateway's first
	// request starts would otherwise fail a task no worker holds before
	// the test cancels it.
	leased := func(era task.Era) *task.Task {
		tk := testTask(task.Anonymous, runtime.Now())
		tk.Era = era
		tk.Lease = task.Lease{Holder: g.rt.Store.Holder(), Expires: runtime.Now().Add(time.Hour)}
		return tk
	}
	for _, era := range []task.Era{task.Era2025, task.Era2026} {
		tk := leased(era)
		if err := g.rt.Store.Create(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		if _, err := g.env.Route.CancelTask(context.Background(), task.Anonymous, tk.ID, http.NotFoundHandler()); err != nil {
			t.Fatalf("%s: cancel: %v", era, err)
		}
	}
	// And through the wire, as a client cancels.
	tk := leased(task.Era2025)
	if err := g.rt.Store.Create(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"` + tk.ID + `"}}`)
	if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("tasks/cancel: %d %s", rec.Code, rec.Body)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.ended[task.StatusCancelled] != 3 {
		t.Errorf("TaskEnded(cancelled) called %d times, want 3", obs.ended[task.StatusCancelled])
	}
}
