package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// An operator's cancel says so in the status message the owner reads and
// in the task's history; the owner's own cancel keeps the message of a
// cancel by request. Both protocol versions. The history, in the admin API
// and caddy mcp-tasks show, begins with the task's creation.
func TestOperatorCancelMessage(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "task_after 200ms"})
	const (
		byOperator = "The task was cancelled by an operator through the admin API."
		byRequest  = "The task was cancelled by request."
	)
	hour := map[string]any{"seconds": 3600}
	c25 := newRPCClient(t, gw.URL)
	c25.initialize("")
	c26 := newV2026Client(t, gw.URL, true)
	create26 := func() string {
		res := c26.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": hour})
		if str(res["resultType"]) != "task" {
			t.Fatalf("slow_compute answered %v, want a task", res)
		}
		return str(res["taskId"])
	}
	status25 := func(id string) (string, string) { got := c25.getTask(id); return got.Status, got.StatusMessage }
	status26 := func(id string) (string, string) {
		got := c26.get(id)
		return str(got["status"]), str(got["statusMessage"])
	}
	tests := []struct {
		name     string
		create   func() string
		cancel   func(id string)
		status   func(id string) (string, string)
		want     string
		operator bool
	}{
		{"2025-11-25, operator", func() string { return c25.createTask("slow_compute", hour, 3600000).TaskID }, nil, status25, byOperator, true},
		{"2026-07-28, operator", create26, nil, status26, byOperator, true},
		{"2025-11-25, owner", func() string { return c25.createTask("slow_compute", hour, 3600000).TaskID },
			func(id string) {
				if m := c25.call("tasks/cancel", map[string]string{"taskId": id}); m.Error != nil {
					t.Fatalf("tasks/cancel: %+v", m.Error)
				}
			}, status25, byRequest, false},
		{"2026-07-28, owner", create26, func(id string) { c26.ok("tasks/cancel", map[string]any{"taskId": id}) }, status26, byRequest, false},
	}
	for _, tt := range tests {
		id := tt.create()
		if tt.operator {
			out, errOut, ok := runCaddy(t, "mcp-tasks", "cancel", id, "--address", gw.adminAddr)
			if !ok {
				t.Fatalf("%s: caddy mcp-tasks cancel: %s %s", tt.name, out, errOut)
			}
		} else {
			tt.cancel(id)
		}
		var status, message string
		waitFor(t, 30*time.Second, tt.name+": the cancel", func() bool {
			status, message = tt.status(id)
			return status == "cancelled"
		})
		if message != tt.want {
			t.Errorf("%s: the owner reads %q, want %q", tt.name, message, tt.want)
		}
		var v adminTaskView
		if code, body := adminDo(t, gw.adminAddr, http.MethodGet, "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK {
			t.Fatalf("%s: admin show: %d %s", tt.name, code, body)
		}
		if n := len(v.History); n < 2 || v.History[n-1].To != "cancelled" || v.History[n-1].Message != tt.want {
			t.Errorf("%s: history %+v, want it to end in cancelled with %q", tt.name, v.History, tt.want)
		}
		// The history begins with the task's creation, in working.
		if len(v.History) > 0 && (v.History[0].From != "" || v.History[0].To != "working") {
			t.Errorf("%s: history %+v, want it to begin with the creation", tt.name, v.History)
		}
		out, errOut, ok := runCaddy(t, "mcp-tasks", "show", id, "--address", gw.adminAddr)
		if !ok || !strings.Contains(out, "(created) -> working") || !strings.Contains(out, "working -> cancelled ("+tt.want+")") {
			t.Errorf("%s: caddy mcp-tasks show:\n%s%s", tt.name, out, errOut)
		}
	}
}
