package taskproxy

import (
	"encoding/json"
	"errors"
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

// A configuration that is only provisioned opens nothing and takes charge of
// nothing; the store opens at the first start, and a gateway that never
// started leaves the started one in charge when it closes.
func TestRuntimeLifecycle(t *testing.T) {
	t.Parallel()
	cfg := Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}
	withRoute := func(route string) Config { c := cfg; c.Route = route; return c }
	tests := []struct {
		name      string
		run       func(t *testing.T, rt *Runtime) *Gateway // returns the gateway expected in charge
		wantOpens int
	}{
		{"provisioned only (caddy validate)", func(t *testing.T, rt *Runtime) *Gateway {
			g := mustNew(t, cfg, rt)
			g.Close()
			return nil
		}, 0},
		{"started", func(t *testing.T, rt *Runtime) *Gateway {
			g := mustNew(t, cfg, rt)
			mustStart(t, g)
			mustStart(t, g)
			return g
		}, 1},
		{"first request starts", func(t *testing.T, rt *Runtime) *Gateway {
			g := mustNew(t, cfg, rt)
			rec := httptest.NewRecorder()
			_ = g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mcp", nil), http.NotFoundHandler())
			return g
		}, 1},
		{"failed reload leaves the old gateway in charge", func(t *testing.T, rt *Runtime) *Gateway {
			old := mustNew(t, withRoute("a"), rt)
			mustStart(t, old)
			failed := mustNew(t, withRoute("a"), rt) // provisioned, then cleaned up
			failed.Close()
			return old
		}, 1},
		{"reload hands over; old cleanup keeps the new in charge", func(t *testing.T, rt *Runtime) *Gateway {
			old := mustNew(t, withRoute("a"), rt)
			mustStart(t, old)
			next := mustNew(t, withRoute("a"), rt)
			mustStart(t, next)
			old.Close()
			return next
		}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opens := 0
			rt := NewLazyRuntime(func() (task.Store, error) {
				opens++
				return newMemStore(t), nil
			})
			want := tt.run(t, rt)
			if opens != tt.wantOpens {
				t.Errorf("store opened %d times, want %d", opens, tt.wantOpens)
			}
			var wantRoute *runtime.Route
			if want != nil {
				wantRoute = want.env.Route
			}
			if got := rt.RouteFor(""); got != wantRoute {
				t.Errorf("route in charge %p, want %p", got, wantRoute)
			}
			if want != nil && rt.RouteFor(want.cfg.Route) != want.env.Route {
				t.Errorf("route %q follows another configuration", want.cfg.Route)
			}
			if err := rt.Close(time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A store that cannot be opened (locked by another process) fails the
// start and answers requests 503; the next start tries again.
func TestRuntimeOpenRetried(t *testing.T) {
	t.Parallel()
	fail := true
	rt := NewLazyRuntime(func() (task.Store, error) {
		if fail {
			return nil, errors.New("locked")
		}
		return newMemStore(t), nil
	})
	defer rt.Close(time.Second)
	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	if err := g.Start(); err == nil {
		t.Fatal("start with a store that cannot open succeeded")
	}
	rec := httptest.NewRecorder()
	_ = g.ServeHTTP(rec, post(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`), http.NotFoundHandler())
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("request while the store is unavailable: %d, want 503", rec.Code)
	}
	fail = false
	mustStart(t, g)
}

func mustNew(t *testing.T, cfg Config, rt *Runtime) *Gateway {
	t.Helper()
	g, err := New(cfg, rt)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustStart(t *testing.T, g *Gateway) {
	t.Helper()
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
}

// Recovery takes each orphan through the route that created it: a re-run
// goes through that route's next handler under that route's
// retry_on_restart list; a task of a route that is gone fails.
func TestRecoveryFollowsRoutes(t *testing.T) {
	t.Parallel()
	store := newMemStore(t)
	ctx := t.Context()
	past := runtime.Now().Add(-time.Hour)
	orphan := func(route, tool string) string {
		id := task.NewTaskID()
		err := store.Create(ctx, &task.Task{ID: id, Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
			TTL: 24 * time.Hour, Era: task.Era2025, Tool: tool, Params: json.RawMessage(`{"name":"` + tool + `"}`),
			Lease: task.Lease{Holder: "e0/p1", Expires: past}, Endpoint: "/mcp", Route: route})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	rerunA, notRetriedB, gone := orphan("a", "echo"), orphan("b", "echo"), orphan("gone", "echo")

	// calls counts the re-runs (the GETs that open the route are not).
	upstream := func(calls *atomic.Int32) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			m, err := jsonrpc.Parse(body)
			if err != nil {
				return // the GET that opens the route
			}
			calls.Add(1)
			data, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"content":[]}`))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(data)
		})
	}
	var callsA, callsB atomic.Int32
	rt := NewRuntime(store)
	defer rt.Close(time.Second)
	cfg := Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}
	cfgA, cfgB := cfg, cfg
	cfgA.Route, cfgA.RetryOnRestart = "a", map[string]bool{"echo": true}
	cfgB.Route = "b"
	gA, gB := mustNew(t, cfgA, rt), mustNew(t, cfgB, rt)
	mustStart(t, gB) // B starts first; A, of the same configuration, is still starting
	waitStatus := func(id string, want task.Status) *task.Task {
		t.Helper()
		return waitStoreStatus(t, store, "o", id, func(s task.Status) bool { return s == want })
	}
	if got := waitStatus(notRetriedB, task.StatusFailed); got.StatusMessage != runtime.MsgRestarted {
		t.Errorf("route b's task (not retry_on_restart there): %q", got.StatusMessage)
	}
	if got := waitStatus(gone, task.StatusFailed); got.StatusMessage != runtime.MsgRouteGone {
		t.Errorf("task of a route that is gone: %q", got.StatusMessage)
	}
	// Route b serving does not carry route a's re-run. A re-run goes
	// through the first request its route serves once it waits, and the
	// recovery may reach it after a request: route a serves until then.
	_ = gB.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil), upstream(&callsB))
	waitFor(t, "route a's re-run completed", func() bool {
		_ = gA.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil), upstream(&callsA))
		got, err := store.Get(ctx, "o", rerunA)
		return err == nil && got.Status == task.StatusCompleted
	})
	if a, b := callsA.Load(), callsB.Load(); a != 1 || b != 0 {
		t.Errorf("route a's next handler got %d re-runs, b's %d; want 1 and 0", a, b)
	}
}
