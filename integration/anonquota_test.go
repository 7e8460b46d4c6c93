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
// takes any 127/8 source address. Behind a trusted proxy the address is
// the client's the proxy forwards.
func TestAnonymousQuotasPerClientAddress(t *testing.T) {
	t.Parallel()
	direct := func(t *testing.T, url string) (a, b *rpcClient, keyA, keyB string) {
		t.Helper()
		return clientFrom(t, url, "127.0.0.1", ""), clientFrom(t, url, "127.0.0.2", ""), "ip:127.0.0.1", "ip:127.0.0.2"
	}
	setups := []struct {
		name  string
		start func(t *testing.T, upstream, directives string) *gateway
		// clients returns A's and B's clients and the quota keys the
		// admin API shows for their tasks.
		clients func(t *testing.T, url string) (a, b *rpcClient, keyA, keyB string)
	}{
		{"badger", func(t *testing.T, upstream, directives string) *gateway {
			return startGateway(t, gatewayOptions{Upstream: upstream, Directives: directives})
		}, direct},
		{"postgres", func(t *testing.T, upstream, directives string) *gateway {
			dsn, _ := testDatabase(t)
			return startPostgresGateway(t, upstream, dsn, directives).gateway
		}, direct},
		// Behind a trusted proxy, both connections come from the proxy's
		// address: each client counts by the address it forwards.
		{"badger behind a trusted proxy", func(t *testing.T, upstream, directives string) *gateway {
			return startGateway(t, gatewayOptions{Upstream: upstream, Directives: directives,
				GlobalOptions: "servers {\n\ttrusted_proxies static 127.0.0.1/32\n}"})
		}, func(t *testing.T, url string) (a, b *rpcClient, keyA, keyB string) {
			return clientFrom(t, url, "127.0.0.1", "198.51.100.1"), clientFrom(t, url, "127.0.0.1", "198.51.100.2"), "ip:198.51.100.1", "ip:198.51.100.2"
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
	for _, st := range setups {
		for _, b := range bounds {
			t.Run(st.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				_, addr := testUpstream(t)
				gw := st.start(t, addr, v2025Tools+"rate_limit 10000\n"+b.directive)
				a, bee, keyA, keyB := st.clients(t, gw.URL)
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
				for id, want := range map[string]string{first: keyA, created.TaskID: keyB} {
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
// connections come from the loopback address ip, and that names
// forwardedFor in X-Forwarded-For unless it is empty.
func clientFrom(t *testing.T, url, ip, forwardedFor string) *rpcClient {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c := newRPCClient(t, url)
	c.http = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
	t.Cleanup(c.http.CloseIdleConnections)
	if forwardedFor != "" {
		c.header.Set("X-Forwarded-For", forwardedFor)
	}
	c.initialize("")
	return c
}
