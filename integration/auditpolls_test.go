package integration

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// With Caddy's default logging (info), a client polling a task
// that does not change writes one "task retrieved" line at info for each
// state it sees, not one a poll; the repeats are at debug level, which the
// default logger drops. Every denial is still at info.
func TestAuditPollsOfUnchangedTask(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	c.initialize("")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 0.2, "label": "polled"}, 60000)
	polls := 0
	waitFor(t, 30*time.Second, "the task to complete", func() bool {
		polls++
		return c.getTask(tk.TaskID).Status == "completed"
	})
	const more, denials = 10, 3
	for range more {
		if got := c.getTask(tk.TaskID).Status; got != "completed" {
			t.Fatalf("a finished task polled as %s", got)
		}
	}
	other := newRPCClient(t, gw.URL)
	other.header.Set("Authorization", "Bearer "+hmacToken(t, "mallory", "t1"))
	other.initialize("")
	for range denials {
		other.call("tasks/get", map[string]string{"taskId": tk.TaskID})
	}

	type line struct{ Level, Msg, Status, Principal string }
	audit := func() []line {
		var out []line
		for s := range strings.SplitSeq(gw.logs(), "\n") {
			if !strings.Contains(s, `"logger":"http.handlers.mcp_tasks.audit"`) {
				continue
			}
			var l line
			if err := json.Unmarshal([]byte(s), &l); err != nil {
				t.Fatalf("audit line %q: %v", s, err)
			}
			out = append(out, l)
		}
		return out
	}
	count := func(ls []line, msg string) (n int) {
		for _, l := range ls {
			if l.Msg == msg {
				n++
			}
		}
		return n
	}
	waitFor(t, 5*time.Second, "the denials' audit lines", func() bool { return count(audit(), "access denied") >= denials })
	lines := audit()
	retrieved := map[string]int{} // status → lines
	for _, l := range lines {
		if l.Level != "info" {
			t.Errorf("audit line at %s with the default logging: %+v", l.Level, l)
		}
		if l.Msg == "task retrieved" {
			retrieved[l.Status]++
		}
	}
	if retrieved["completed"] != 1 {
		t.Errorf("%d polls of the completed task wrote %d info lines, want 1", more+1, retrieved["completed"])
	}
	for status, n := range retrieved {
		if n > 1 {
			t.Errorf("status %s read %d times at info (of %d polls), want once", status, n, polls+more)
		}
	}
	if n := count(lines, "access denied"); n != denials {
		t.Errorf("%d denials wrote %d info lines, want %d", denials, n, denials)
	}
	for _, msg := range []string{"task created", "task completed"} {
		if count(lines, msg) != 1 {
			t.Errorf("%d %q lines, want 1:\n%s", count(lines, msg), msg, gw.logs())
		}
	}
}
