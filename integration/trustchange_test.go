package integration

import (
	"strings"
	"testing"
	"time"
)

// A reload that changes what an auth jwt route's trust domain digests (an
// hmac_secret added for a rotation) changes its callers' owner keys: their
// tasks are unreachable to them from then on, as documented. Caddy's log
// says so at the reload, naming both trust domains, instead of leaving the
// operator to learn it from clients whose tasks are "not found". A reload
// that keeps the keys says nothing.
func TestReloadWarnsOfTrustDomainChange(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	c.initialize("")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)

	const warning = "the owner keys of this route's callers change with this configuration"
	gw.reload(v2025Tools + hmacAuth + "default_ttl 20m")
	if got := c.getTask(tk.TaskID); got.TaskID != tk.TaskID {
		t.Fatalf("after a reload that keeps the keys, tasks/get = %+v", got)
	}
	rotated := strings.Replace(hmacAuth, "hmac_secret "+testHMACSecret, "hmac_secret "+testHMACSecret+"\n\thmac_secret next-secret-of-at-least-32-bytes-000", 1)
	if rotated == hmacAuth {
		t.Fatal("the rotated auth block is the same")
	}
	gw.reload(v2025Tools + rotated)
	waitFor(t, 30*time.Second, "the warning that owner keys changed", func() bool { return strings.Contains(gw.logs(), warning) })
	var lines []string
	for line := range strings.Lines(gw.logs()) {
		if strings.Contains(line, warning) {
			lines = append(lines, line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"trust_domain_before":"jwt:`) || !strings.Contains(lines[0], `"trust_domain":"jwt:`) {
		t.Errorf("want one warning naming both trust domains, got:\n%s", strings.Join(lines, ""))
	}
}
