package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The quota holds under concurrency on both wires: 30 concurrent creates
// at max_active_per_principal 3 give exactly 3 tasks and 27 refusals with
// -32000 and the limit. On 2026-07-28 an over-cap call is refused, never run
// as a plain call.
func TestQuotaConcurrentCreates(t *testing.T) {
	t.Parallel()
	const calls, limit = 30, 3
	tests := []struct {
		name string
		era  string
		// create makes one call and returns whether it created a task, or
		// the JSON-RPC error.
		create func(t *testing.T, gw *gateway) (bool, *jsonrpc.Error)
	}{
		{"2025-11-25", "2025-11-25", func(t *testing.T, gw *gateway) (bool, *jsonrpc.Error) {
			c := newRPCClient(t, gw.URL)
			c.initialize("")
			m := c.callTool("slow_compute", map[string]any{"seconds": 30}, map[string]any{"ttl": 60000})
			return m.Error == nil && strings.Contains(string(m.Result), `"taskId"`), m.Error
		}},
		{"2026-07-28", "2026-07-28", func(t *testing.T, gw *gateway) (bool, *jsonrpc.Error) {
			c := newV2026Client(t, gw.URL, true)
			m, status := c.request(context.Background(), "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 30}})
			if m.Error != nil && status != http.StatusOK {
				t.Errorf("refusal with HTTP %d", status)
			}
			return m.Error == nil && strings.Contains(string(m.Result), `"resultType":"task"`), m.Error
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, addr := testUpstream(t)
			gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools +
				fmt.Sprintf("task_after 200ms\nmax_active_per_principal %d\nrate_limit 1000", limit)})
			var wg sync.WaitGroup
			var mu sync.Mutex
			created, refused := 0, 0
			for range calls {
				wg.Go(func() {
					ok, e := tt.create(t, gw)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case ok:
						created++
					case e != nil && e.Code == -32000 && strings.Contains(e.Message, fmt.Sprintf("too many active tasks (limit %d)", limit)):
						refused++
					default:
						t.Errorf("neither a task nor the quota refusal: %+v", e)
					}
				})
			}
			wg.Wait()
			if created != limit || refused != calls-limit {
				t.Errorf("%d tasks created, %d refused; want %d and %d", created, refused, limit, calls-limit)
			}
			metrics := gw.metrics()
			if want := fmt.Sprintf(`caddy_mcp_tasks_created_total{era=%q} %d`, tt.era, limit); !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "caddy_mcp_tasks"))
			}
		})
	}
}

// Creating a task takes from the caller's rate-limit bucket, like the other
// task operations.
func TestRateLimitTaskCreation(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "rate_limit 1"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	limited := 0
	for range 8 {
		body, _ := jsonrpc.RequestBytes(c.id(), "tools/call", map[string]any{
			"name": "slow_compute", "arguments": map[string]any{"seconds": 0.01}, "task": map[string]any{"ttl": 60000}})
		resp := c.post(context.Background(), body)
		var m jsonrpc.Message
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
			if m.Error == nil || m.Error.Code != -32005 || resp.Header.Get("Retry-After") == "" {
				t.Errorf("429 without -32005 and Retry-After: %+v", m.Error)
			}
		}
	}
	if limited == 0 {
		t.Error("8 task creates in a row at rate_limit 1 were never limited")
	}
}
