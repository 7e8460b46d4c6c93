package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Logs an on-call engineer can trust: when the gateway itself ends an
// upstream call (a client's tasks/cancel of a task the gateway runs, a
// run_timeout), Caddy's reverse_proxy logs no warning or error about it,
// and no request error is logged for the call: nothing failed.
func TestGatewayCancelLogsNoProxyError(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: `
tool slow_compute optional run_timeout 1s
tool slow_echo optional
`})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	// A progress token makes the upstream stream its answer (progress
	// notifications), so the call is cancelled mid-stream, after its
	// headers: the case reverse_proxy logs as an aborted response.
	create := func(tool string, seconds float64) v2025Task {
		t.Helper()
		m := c.call("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"seconds": seconds, "label": "never"},
			"task": map[string]any{"ttl": 3600000}, "_meta": map[string]any{"progressToken": tool}})
		var created struct {
			Task *v2025Task `json:"task"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &created) != nil || created.Task == nil {
			t.Fatalf("tools/call %s: %s %+v", tool, m.Result, m.Error)
		}
		return *created.Task
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A client's tasks/cancel of a task whose call is running.
	cancelled := create("slow_echo", 3600)
	if err := up.WaitCalls(ctx, "slow_echo", 1); err != nil {
		t.Fatal(err)
	}
	if m := c.call("tasks/cancel", map[string]string{"taskId": cancelled.TaskID}); m.Error != nil {
		t.Fatalf("tasks/cancel: %+v", m.Error)
	}
	if err := up.WaitCancellations(ctx, "slow_echo", 1); err != nil {
		t.Fatalf("the upstream's call was not cancelled: %v", err)
	}
	// A run_timeout.
	timedOut := create("slow_compute", 3600)
	waitFor(t, 30*time.Second, "the run timeout", func() bool { return c.getTask(timedOut.TaskID).Status == "failed" })
	if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
		t.Fatalf("the upstream's call was not cancelled: %v", err)
	}

	// The gateway's own log lines for both cancels are written before the
	// upstream sees them end; a last ordinary call flushes the rest.
	done := c.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
	waitFor(t, 30*time.Second, "a quick task", func() bool { return c.getTask(done.TaskID).Status == "completed" })
	for line := range strings.SplitSeq(gw.logs(), "\n") {
		if !strings.Contains(line, `"level":"warn"`) && !strings.Contains(line, `"level":"error"`) {
			continue
		}
		if strings.Contains(line, "reverse_proxy") || strings.Contains(line, `"logger":"http.log.error"`) ||
			strings.Contains(line, "context canceled") || strings.Contains(line, "aborting") {
			t.Errorf("the gateway's own cancel is logged as a failure: %s", line)
		}
	}
}
