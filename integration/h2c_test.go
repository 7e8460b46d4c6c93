package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// h2cUpstream runs the go-sdk fixture on a loopback listener that speaks
// HTTP/2 without TLS (h2c, prior knowledge) beside HTTP/1.1, counting the
// requests of each protocol version.
func h2cUpstream(t *testing.T) (up *upstream.Server, addr string, http1, http2 *atomic.Int64) {
	t.Helper()
	up = upstream.New(upstream.Options{})
	http1, http2 = new(atomic.Int64), new(atomic.Int64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			http2.Add(1)
		} else {
			http1.Add(1)
		}
		up.ServeHTTP(w, r)
	}))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	return up, strings.TrimPrefix(srv.URL, "http://"), http1, http2
}

// TestH2CUpstream runs the task flows of both protocol versions in front of
// an upstream Caddy reaches over h2c (`reverse_proxy h2c://…`), where the
// calls of running tasks share connections as HTTP/2 streams: tasks
// complete, many at once; a cancelled task's call ends at the upstream (a
// stream reset, not a closed connection); a plain call passes through; and
// every request the upstream saw was HTTP/2.
func TestH2CUpstream(t *testing.T) {
	t.Parallel()
	up, addr, http1, http2 := h2cUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: "h2c://" + addr, Directives: v2025Tools + "task_after 500ms"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c := newRPCClient(t, gw.URL)
	c.initialize("")
	t.Run("2025-11-25 tasks complete, many at once", func(t *testing.T) {
		// Created one after another, they run at the upstream at once.
		const n = 20
		ids := make([]string, n)
		for i := range n {
			ids[i] = c.createTask("slow_compute", map[string]any{"seconds": 0.5, "label": fmt.Sprintf("h2c-%d", i)}, 60000).TaskID
		}
		for i, id := range ids {
			m := c.call("tasks/result", map[string]string{"taskId": id})
			if want := fmt.Sprintf("Computed h2c-%d in", i); m.Error != nil || !strings.Contains(string(m.Result), want) {
				t.Errorf("tasks/result of task %d = %s / %+v, want %q", i, m.Result, m.Error, want)
			}
		}
	})
	t.Run("2025-11-25 cancel reaches the upstream", func(t *testing.T) {
		before := up.Cancellations("slow_compute")
		tk := c.createTask("slow_compute", map[string]any{"seconds": 60, "label": "h2c-cancel"}, 60000)
		if err := up.WaitCalls(ctx, "slow_compute", 21); err != nil {
			t.Fatal(err)
		}
		var cancelled v2025Task
		c.result("tasks/cancel", map[string]string{"taskId": tk.TaskID}, &cancelled)
		if cancelled.Status != "cancelled" {
			t.Fatalf("tasks/cancel answered %+v", cancelled)
		}
		if err := up.WaitCancellations(ctx, "slow_compute", before+1); err != nil {
			t.Fatalf("the upstream never saw the cancellation: %v", err)
		}
	})
	t.Run("a plain call passes through", func(t *testing.T) {
		m := c.call("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "h2c"}})
		var res struct{ Content []struct{ Text string } }
		if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "h2c") {
			t.Errorf("greet = %s / %+v", m.Result, m.Error)
		}
	})
	t.Run("2026-07-28 task and its cancel", func(t *testing.T) {
		v26 := newV2026Client(t, gw.URL, true)
		done := v26.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "h2c-2026"}})
		if got := v26.waitStatus(str(done["taskId"]), "completed"); !strings.Contains(string(got["result"]), "Computed h2c-2026") {
			t.Errorf("completed task = %v", got)
		}
		before := up.Cancellations("slow_compute")
		held := v26.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60, "label": "h2c-2026-cancel"}})
		v26.ok("tasks/cancel", map[string]any{"taskId": str(held["taskId"])})
		if err := up.WaitCancellations(ctx, "slow_compute", before+1); err != nil {
			t.Fatalf("the upstream never saw the cancellation: %v", err)
		}
		if got := v26.get(str(held["taskId"])); str(got["status"]) != "cancelled" {
			t.Errorf("after cancel: %v", got)
		}
	})
	if http1.Load() != 0 || http2.Load() == 0 {
		t.Errorf("the upstream saw %d HTTP/1 and %d HTTP/2 requests, want HTTP/2 only", http1.Load(), http2.Load())
	}
}
