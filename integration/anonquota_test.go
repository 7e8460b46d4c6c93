package integration

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// On a route without authentication every caller is the one anonymous
// owner, yet max_active_per_principal and max_finished_per_principal count
// each client address apart (as the rate limit does): client A, dialling
// from 127.0.0.1, fills a bound and is refused with -32000 naming it, and
// client B, dialling from 127.0.0.2, still creates tasks. Loopback on Linux
// takes any 127/8 source address.
func TestAnonymousQuotasPerClientAddress(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name  string
		start func(t *testing.T, upstream, directives string) *gateway
	}{
		{"badger", func(t *testing.T, upstream, directives string) *gateway {
			return startGateway(t, gatewayOptions{Upstream: upstream, Directives: directives})
		}},
		{"postgres", func(t *testing.T, upstream, directives string) *gateway {
			dsn, _ := testDatabase(t)
			return startPostgresGateway(t, upstream, dsn, directives).gateway
		}},
	}
	bounds := []struct {
		name      string
		directive string
		refusal   string
		// task is the call that fills the bound, and wait what each of
		// A's tasks must reach before the next.
		tool string
		args map[string]any
		wait string
	}{
		{"finished", "max_finished_per_principal 2", "too many finished tasks kept (limit 2)",
			"big_result", map[string]any{"bytes": 10}, "completed"},
		{"active", "max_active_per_principal 2", "too many active tasks (limit 2)",
			"slow_compute", map[string]any{"seconds": 60}, "working"},
	}
	for _, st := range stores {
		for _, b := range bounds {
			t.Run(st.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				_, addr := testUpstream(t)
				gw := st.start(t, addr, v2025Tools+"rate_limit 10000\n"+b.directive)
				a, bee := clientFrom(t, gw.URL, "127.0.0.1"), clientFrom(t, gw.URL, "127.0.0.2")
				var first string
				for range 2 {
					created := a.createTask(b.tool, b.args, 600000)
					waitStatus(t, a, created.TaskID, b.wait, 30*time.Second)
					first = created.TaskID
				}
				m := a.callTool(b.tool, b.args, map[string]any{"ttl": 600000})
				if m.Error == nil || m.Error.Code != -32000 || !strings.Contains(m.Error.Message, b.refusal) {
					t.Fatalf("A's create at the bound: error %+v, result %s; want -32000 with %q", m.Error, m.Result, b.refusal)
				}
				created := bee.createTask(b.tool, b.args, 600000)
				waitStatus(t, bee, created.TaskID, b.wait, 30*time.Second)
				// The tasks are still the one anonymous owner's: B reads
				// A's as before.
				if got := bee.getTask(first); got.TaskID != first {
					t.Errorf("B's tasks/get of A's task: %+v", got)
				}
				if m := a.callTool(b.tool, b.args, map[string]any{"ttl": 600000}); m.Error == nil || !strings.Contains(m.Error.Message, b.refusal) {
					t.Errorf("A after B's create: error %+v; want still refused", m.Error)
				}
				// The admin API shows whom each task counts against.
				for id, want := range map[string]string{first: "ip:127.0.0.1", created.TaskID: "ip:127.0.0.2"} {
					var v struct {
						Principal string `json:"principal"`
						QuotaKey  string `json:"quota_key"`
					}
					if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK || v.QuotaKey != want {
						t.Errorf("admin API on task %s: %d %s; want quota_key %q", id, code, body, want)
					}
				}
			})
		}
	}
}

// clientFrom returns an initialized 2025-11-25 client of url whose
// connections come from the loopback address ip.
func clientFrom(t *testing.T, url, ip string) *rpcClient {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c := newRPCClient(t, url)
	c.http = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	t.Cleanup(c.http.CloseIdleConnections)
	c.initialize("")
	return c
}
