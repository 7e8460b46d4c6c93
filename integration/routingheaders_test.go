package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// A 2026-07-28 client that sends tasks/get, tasks/update and tasks/cancel
// without Mcp-Name (FastMCP's tasks client does) keeps its tasks through the
// gateway: the name is taken from params.taskId, and the cancellation
// reaches the upstream. routing_headers strict refuses such requests, as
// the extension's MUST says.
func TestV2026TaskMethodsWithoutMcpName(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	lenient := startGateway(t, gatewayOptions{Upstream: addr, Directives: "task_after 300ms"})
	strict := startGateway(t, gatewayOptions{Upstream: addr, Directives: "task_after 300ms\nrouting_headers strict"})

	t.Run("lenient by default", func(t *testing.T) {
		c := newV2026Client(t, lenient.URL, true)
		c.noTaskName = true
		res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60, "label": "fastmcp"}})
		id := str(res["taskId"])
		if id == "" {
			t.Fatalf("no task: %v", res)
		}
		if got := c.get(id); str(got["status"]) != "working" || str(got["taskId"]) != id {
			t.Errorf("tasks/get without Mcp-Name = %v", got)
		}
		if ack := c.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{}}); str(ack["resultType"]) != "complete" {
			t.Errorf("tasks/update without Mcp-Name = %v", ack)
		}
		if ack := c.ok("tasks/cancel", map[string]any{"taskId": id}); str(ack["resultType"]) != "complete" {
			t.Errorf("tasks/cancel without Mcp-Name = %v", ack)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
			t.Fatalf("the upstream never saw the cancellation: %v", err)
		}
		if got := c.get(id); str(got["status"]) != "cancelled" {
			t.Errorf("after cancel: %v", got)
		}
	})

	t.Run("a mismatching Mcp-Name is refused", func(t *testing.T) {
		c := newV2026Client(t, lenient.URL, true)
		_, body := c.body("tasks/get", map[string]any{"taskId": "some-task"})
		req := c.newRequest(context.Background(), body)
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tasks/get")
		req.Header.Set("Mcp-Name", "another-task")
		s := c.openRequest(req, nil)
		defer s.close()
		if m := s.next(); s.status != http.StatusBadRequest || m == nil || m.Error == nil || m.Error.Code != -32020 {
			t.Errorf("HTTP %d %+v, want 400 -32020", s.status, m)
		}
	})

	t.Run("routing_headers strict", func(t *testing.T) {
		c := newV2026Client(t, strict.URL, true)
		res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 2, "label": "strict"}})
		id := str(res["taskId"])
		c.noTaskName = true
		m, status := c.request(context.Background(), "tasks/get", map[string]any{"taskId": id})
		if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32020 {
			t.Errorf("tasks/get without Mcp-Name under strict: HTTP %d %+v, want 400 -32020", status, m.Error)
		}
		c.noTaskName = false
		c.waitStatus(id, "completed")
	})
}

// A tools/call the gateway passes on (here: from a client without the tasks
// extension) never leaves it with an Mcp-Name that disagrees with
// params.name: the gateway decided the call's task mode, quota and audit by
// the body, and whatever routes by the header (a balancer, a server that
// trusts it) would run another tool. The upstream's front records every
// Mcp-Name that reaches it.
func TestPassedOnToolsCallMismatchingMcpName(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{})
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Values("Mcp-Name"); len(v) > 0 {
			mu.Lock()
			seen = append(seen, v...)
			mu.Unlock()
		}
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g := startGateway(t, gatewayOptions{Upstream: strings.TrimPrefix(srv.URL, "http://")})
	c := newV2026Client(t, g.URL, false)

	_, body := c.body("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}})
	req := c.newRequest(context.Background(), body)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "delete_everything")
	s := c.openRequest(req, nil)
	defer s.close()
	if m := s.next(); s.status != http.StatusBadRequest || m == nil || m.Error == nil || m.Error.Code != -32020 {
		t.Errorf("HTTP %d %+v, want 400 -32020", s.status, m)
	}
	if res := c.ok("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}}); res == nil {
		t.Fatal("a matching call failed")
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(seen, "delete_everything") || !slices.Contains(seen, "greet") {
		t.Errorf("the upstream saw Mcp-Name %q, want only the matching call's", seen)
	}
}
