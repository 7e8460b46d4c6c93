package taskproxy

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A configuration that is only provisioned opens nothing and takes charge of
// nothing; the store opens at the first start, and a gateway that never
// started leaves the started one in charge when it closes.
func TestRuntimeLifecycle(t *testing.T) {
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
			opens := 0
			rt := NewLazyRuntime(func() (Store, error) {
				opens++
				return newMemStore(t), nil
			})
			want := tt.run(t, rt)
			if opens != tt.wantOpens {
				t.Errorf("store opened %d times, want %d", opens, tt.wantOpens)
			}
			if got := rt.gateway.Load(); got != want {
				t.Errorf("gateway in charge %p, want %p", got, want)
			}
			if want != nil && rt.gatewayFor(want.cfg.Route) != want {
				t.Errorf("route %q follows another gateway", want.cfg.Route)
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
	fail := true
	rt := NewLazyRuntime(func() (Store, error) {
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
