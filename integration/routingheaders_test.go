package integration

import (
	"context"
	"net/http"
	"testing"
	"time"
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
