package taskproxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Recovered tasks that wait for their route ask the glue for a request of
// its own (Config.RequestBase) at once, to their endpoint and host, and run
// through the next handler ServeBase is given with it, though no client
// request is ever served. Tasks recovered together share one such request.
func TestRecoveryRequestsBase(t *testing.T) {
	t.Parallel()
	store := newMemStore(t)
	ctx := t.Context()
	past := runtime.Now().Add(-time.Hour)
	var ids []string
	for range 2 {
		id := task.NewTaskID()
		err := store.Create(ctx, &task.Task{ID: id, Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
			TTL: 24 * time.Hour, Era: task.Era2025, Tool: "echo", Params: json.RawMessage(`{"name":"echo"}`),
			Lease: task.Lease{Holder: "e0/p1", Expires: past}, Endpoint: "/mcp?x=1", Host: "gw.example", Route: "a"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}

	var calls atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil || r.Host != "gw.example" || r.URL.RequestURI() != "/mcp?x=1" {
			t.Errorf("re-run: %s %s%s %s (%v), want a call to gw.example/mcp?x=1", r.Method, r.Host, r.URL, body, err)
			return
		}
		calls.Add(1)
		data, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"content":[]}`))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	var requests atomic.Int32
	var gw atomic.Pointer[Gateway]
	cfg := Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Route: "a", RetryOnRestart: map[string]bool{"echo": true}}
	cfg.RequestBase = func(ctx context.Context, t *task.Task) {
		requests.Add(1)
		r := httptest.NewRequest(http.MethodPost, t.Endpoint, nil).WithContext(ctx)
		r.Host = t.Host
		gw.Load().ServeBase(r, next)
	}
	rt := NewRuntime(store)
	defer rt.Close(time.Second)
	gw.Store(mustNew(t, cfg, rt))
	mustStart(t, gw.Load())

	for _, id := range ids {
		waitStoreStatus(t, store, "o", id, func(s task.Status) bool { return s == task.StatusCompleted }) // by a re-run
	}
	if c, r := calls.Load(), requests.Load(); c != 2 || r != 1 {
		t.Errorf("%d re-runs through %d requests for a base, want 2 through 1", c, r)
	}
}
