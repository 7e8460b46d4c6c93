package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
)

// The readiness probe names why a store cannot take tasks, the drain
// first: a draining process is not ready whatever its stores say.
func TestNotReadyReason(t *testing.T) {
	t.Parallel()
	ok := taskproxy.Health{Open: true, Reachable: true, Writable: true, Recovered: true}
	with := func(f func(*taskproxy.Health)) taskproxy.Health { h := ok; f(&h); return h }
	for _, tc := range []struct {
		name string
		h    taskproxy.Health
		want string
	}{
		{"draining", with(func(h *taskproxy.Health) { h.Draining, h.Open = true, false }), "draining: the process stops"},
		{"not open", taskproxy.Health{Error: "Cannot acquire directory lock"}, "not open: Cannot acquire directory lock"},
		{"unreachable", with(func(h *taskproxy.Health) { h.Reachable, h.Error = false, "connection refused" }), "unreachable: connection refused"},
		{"not writable", with(func(h *taskproxy.Health) { h.Writable, h.Error = false, "no space left" }), "not writable: no space left"},
		{"recovering", with(func(h *taskproxy.Health) { h.Recovered = false }), "recovering the tasks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.h.Healthy() {
				t.Fatalf("%+v is healthy", tc.h)
			}
			if got := notReady(tc.h); !strings.HasPrefix(got, tc.want) {
				t.Errorf("notReady(%+v) = %q, want %q…", tc.h, got, tc.want)
			}
		})
	}
}

// Both probes answer GET only, as the other admin routes do, and the
// liveness probe needs no store.
func TestProbeRoutes(t *testing.T) {
	t.Parallel()
	a := &AdminAPI{}
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodGet, "/mcp_tasks/health/live", http.StatusOK, `{"live":true}`},
		{http.MethodHead, "/mcp_tasks/health/live", http.StatusOK, ""}, // curl -I; the server drops the body
		{http.MethodPut, "/mcp_tasks/health/live", http.StatusMethodNotAllowed, "use GET"},
		{http.MethodPost, "/mcp_tasks/health/live", http.StatusMethodNotAllowed, "use GET"},
		{http.MethodPost, "/mcp_tasks/health/ready", http.StatusMethodNotAllowed, "use GET"},
		{http.MethodDelete, "/mcp_tasks/health/ready", http.StatusMethodNotAllowed, "use GET"},
		{http.MethodGet, "/mcp_tasks/health/dead", http.StatusNotFound, "no such mcp_tasks admin route"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			if err := a.serve(w, httptest.NewRequest(tc.method, tc.path, nil)); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Errorf("%s %s = %d %s, want %d with %q", tc.method, tc.path, w.Code, w.Body, tc.status, tc.body)
			}
		})
	}
}
