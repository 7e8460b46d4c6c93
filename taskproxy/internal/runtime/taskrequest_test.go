package runtime

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A request about a task made on a replica without its worker carries what
// the task's call speaks, not the caller's wire: on a 2025-11-25 session
// its id and version, no 2026-07-28 routing headers; the caller's other
// headers (its authentication) stay.
func TestTaskUpstreamBase(t *testing.T) {
	t.Parallel()
	caller := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://other.example/mcp/b?x=1", strings.NewReader(`{}`))
		for k, v := range map[string]string{
			"Authorization": "Bearer tok", upstream.HeaderProtocolVersion: "2026-07-28", upstream.HeaderMethod: "tasks/update",
			upstream.HeaderName: "T1", "Mcp-Param-Region": "eu", upstream.HeaderSessionID: "callers",
		} {
			r.Header.Set(k, v)
		}
		return r
	}
	tests := []struct {
		name    string
		tk      task.Task
		version string // "" for none
		session string
		routing bool // the 2026-07-28 routing headers stay
	}{
		{"2025-11-25 task", task.Task{Era: task.Era2025, Session: "s-1", Headers: map[string]string{upstream.HeaderProtocolVersion: "2025-11-25"}}, "2025-11-25", "s-1", false},
		{"2025-11-25 task created without a version header", task.Task{Era: task.Era2025, Session: "s-1"}, "", "s-1", false},
		{"2025-11-25 task of an upstream without sessions", task.Task{Era: task.Era2025, Headers: map[string]string{upstream.HeaderProtocolVersion: "2025-11-25"}}, "2025-11-25", "", false},
		{"bridged task on an older session", task.Task{Era: task.Era2026, Session: "s-2", Headers: map[string]string{upstream.HeaderProtocolVersion: "2025-06-18", upstream.HeaderMethod: "tools/call"}}, "2025-06-18", "s-2", false},
		{"bridged task recorded with the caller's version", task.Task{Era: task.Era2026, Session: "s-3", Headers: map[string]string{upstream.HeaderProtocolVersion: "2026-07-28"}}, string(task.Era2025), "s-3", false},
		{"2026-07-28 task: the caller's wire", task.Task{Era: task.Era2026, Headers: map[string]string{upstream.HeaderProtocolVersion: "2026-07-28"}}, "2026-07-28", "callers", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.tk.Endpoint, tt.tk.Host = "/mcp/a", "gw.example"
			base := TaskUpstreamBase(t.Context(), caller(), &tt.tk)
			h := base.Header
			if got := h.Get(upstream.HeaderProtocolVersion); got != tt.version {
				t.Errorf("version %q, want %q", got, tt.version)
			}
			if got := h.Get(upstream.HeaderSessionID); got != tt.session {
				t.Errorf("session %q, want %q", got, tt.session)
			}
			routing := h.Get(upstream.HeaderMethod) != "" || h.Get(upstream.HeaderName) != "" || h.Get("Mcp-Param-Region") != ""
			if routing != tt.routing {
				t.Errorf("routing headers kept: %v, want %v (%v)", routing, tt.routing, h)
			}
			if h.Get("Authorization") != "Bearer tok" {
				t.Errorf("the caller's authentication was dropped: %v", h)
			}
			if base.URL.Path != "/mcp/a" || base.URL.RawQuery != "" || base.Host != "gw.example" {
				t.Errorf("sent to %s%s, want the task's endpoint gw.example/mcp/a", base.Host, base.URL.RequestURI())
			}
		})
	}
}
