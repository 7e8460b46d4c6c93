package integration

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// Several gateway replicas on one PostgreSQL database behind a round-robin
// balancer (a fourth Caddy), in front of one go-sdk upstream.

// replicaDirectives configure every replica alike: the same JWT secret and
// trust domain (so that a caller's owner key is the same on each), one
// retry_on_restart tool, and a small quota.
const replicaDirectives = v2025Tools + hmacAuth + `
trust_domain replicas-e2e
tool slow_echo optional retry_on_restart
task_after 300ms
max_active_per_principal 3
rate_limit 1000
`

// replicaCluster is the replicas, the balancer and what the test created.
type replicaCluster struct {
	t     *testing.T
	up    *upstream.Server
	nodes []*postgresGateway
	lb    *multiSiteCaddy
	// URL is the balancer's MCP endpoint, the only one clients use.
	URL string

	mu      sync.Mutex
	created map[string]string // task id -> its owner's subject
}

// startReplicaCluster starts n replicas on one fresh database and the
// balancer in front of them. Their lease is 10s rather than the default
// 30s, so that a killed replica's tasks are taken over in seconds; the
// default lease's takeover has a test of its own
// (TestReplicaTakeoverDefaultLease).
func startReplicaCluster(t *testing.T, n int) *replicaCluster {
	t.Helper()
	dsn, _ := testDatabase(t)
	return startReplicaClusterOn(t, n, dsn, replicaDirectives+"lease 10s\n")
}

// startReplicaClusterOn starts n replicas configured with directives on
// the database of dsn, and the balancer in front of them.
func startReplicaClusterOn(t *testing.T, n int, dsn, directives string) *replicaCluster {
	t.Helper()
	up, upAddr := testUpstream(t)
	c := &replicaCluster{t: t, up: up, created: map[string]string{}}
	c.start(n, upAddr, dsn, directives)
	return c
}

// start starts n replicas in front of upAddr on the database of dsn,
// configured with directives, and the balancer in front of them.
func (c *replicaCluster) start(n int, upAddr, dsn, directives string) {
	t := c.t
	t.Helper()
	var addrs []string
	for range n {
		g := startPostgresGateway(t, upAddr, dsn, directives)
		c.nodes = append(c.nodes, g)
		addrs = append(addrs, g.addr)
	}
	for i, g := range c.nodes {
		g.healthy(fmt.Sprintf("replica %d's store to open", i))
	}
	lbAddr := freeAddr(t)
	c.lb = startMultiSite(t, balancerSite(lbAddr, addrs), lbAddr)
	c.URL = "http://" + lbAddr + "/mcp"
}

// balancerSite is a Caddy site that spreads requests over backends in
// turn. flush_interval -1 lets event streams through as they come; a
// backend that refuses connections (a dead replica) is skipped for
// fail_duration, and the request tried on the next one.
func balancerSite(addr string, backends []string) string {
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	return fmt.Sprintf(`http://:%s {
	bind 127.0.0.1
	reverse_proxy %s {
		lb_policy round_robin
		lb_try_duration 5s
		fail_duration 2m
		flush_interval -1
	}
}
`, port, strings.Join(backends, " "))
}

// track records a created task for the final check that none is lost.
func (c *replicaCluster) track(id, owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.created[id] = owner
}

// v2025 opens a 2025-11-25 session for subject through the balancer.
func (c *replicaCluster) v2025(t testing.TB, subject string) *rpcClient {
	t.Helper()
	rc := newRPCClient(t, c.URL)
	rc.header.Set("Authorization", "Bearer "+hmacToken(t, subject, "t1"))
	rc.initialize("")
	return rc
}

// v2026 is a 2026-07-28 client of subject through the balancer.
func (c *replicaCluster) v2026(t *testing.T, subject string) *v2026Client {
	t.Helper()
	mc := newV2026Client(t, c.URL, true)
	mc.header.Set("Authorization", "Bearer "+hmacToken(t, subject, "t1"))
	return mc
}

// replicaTask is what one replica's admin API shows of a task.
type replicaTask struct {
	Status        string `json:"status"`
	StatusMessage string `json:"status_message"`
	RunningHere   bool   `json:"running_here"`
	LeaseHolder   string `json:"lease_holder"`
}

// runningOn returns the index of the live replica whose worker runs task
// id, waiting for one to; -1 if none does in time.
func (c *replicaCluster) runningOn(id string) int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, g := range c.nodes {
			if g.proc.Exited() {
				continue
			}
			var v replicaTask
			if code, _ := adminDo(c.t, g.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code == http.StatusOK && v.RunningHere {
				if pid := fmt.Sprintf("/p%d/", g.proc.Cmd.Process.Pid); !strings.Contains(v.LeaseHolder+"/", pid) {
					c.t.Errorf("replica %d runs task %s but the lease holder is %q, want one with %s", i, id, v.LeaseHolder, pid)
				}
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

// holderOf returns the index of the replica holding task id's lease, as a
// live replica's admin API shows it (pg/<host>/p<pid>/…); -1 if none
// does.
func (c *replicaCluster) holderOf(id string) int {
	c.t.Helper()
	for _, g := range c.nodes {
		if g.proc.Exited() {
			continue
		}
		var v replicaTask
		if code, _ := adminDo(c.t, g.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK {
			continue
		}
		for i, n := range c.nodes {
			if strings.Contains(v.LeaseHolder+"/", fmt.Sprintf("/p%d/", n.proc.Cmd.Process.Pid)) {
				return i
			}
		}
		return -1
	}
	return -1
}

// kill ends replica i with SIGKILL, then sends the balancer a few GETs
// (which it retries on another replica, unlike POSTs whose request may
// have been sent): a keep-alive connection to the dead replica fails one
// of them, and the balancer leaves the replica out for fail_duration, as
// it would after the first client's request.
func (c *replicaCluster) kill(i int) {
	c.t.Helper()
	killGateway(c.t, c.nodes[i].gateway)
	base := strings.TrimSuffix(c.URL, "/mcp") + "/"
	for range 3 * len(c.nodes) {
		resp, err := httpClient.Get(base)
		if err != nil {
			c.t.Fatalf("GET through the balancer after the kill: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			c.t.Fatalf("GET through the balancer after the kill: HTTP %d", resp.StatusCode)
		}
	}
}
