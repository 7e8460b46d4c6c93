package integration

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The upstream taken away under steady load of both protocol versions: the
// go-sdk fixture (cmd/demo-upstream) runs as a process of its own, is
// killed with SIGKILL in the middle of calls and started again on the same
// port, at once or after an outage. 2025-11-25 clients lose their upstream
// session (it lived in the killed process), 2026-07-28 clients' call
// streams break. Every accepted task ends with a reason, none stays
// working, none is lost; once the upstream is back, new calls of both
// versions work without restarting Caddy.

// upstreamFaultDirectives configure the gateway of the upstream fault
// tests; the quota and rate stay out of the way of the load.
const upstreamFaultDirectives = v2025Tools + `
tool slow_echo optional
task_after 300ms
max_active_per_principal 1000
rate_limit 1000
`

// upstreamProcess is the fixture as a process that can be killed and
// started again on its address.
type upstreamProcess struct {
	t         *testing.T // the test the process lives for (not a subtest's)
	bin, addr string
	proc      *startedProcess
}

// startUpstreamProcess runs cmd/demo-upstream on a free port: the binary
// ./xcaddy.sh built ($DEMO_UPSTREAM_BINARY), else one built here.
func startUpstreamProcess(t *testing.T) *upstreamProcess {
	t.Helper()
	bin := os.Getenv("DEMO_UPSTREAM_BINARY")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "demo-upstream")
		if out, err := runCmd(goBuildTimeout, nil, "", "go", "build", "-o", bin, "./cmd/demo-upstream"); err != nil {
			t.Fatalf("building cmd/demo-upstream: %v\n%s", err, out)
		}
	}
	u := &upstreamProcess{t: t, bin: bin, addr: freeAddr(t)}
	u.start()
	return u
}

// start runs the fixture on its address, until the test ends.
func (u *upstreamProcess) start() {
	u.t.Helper()
	u.proc = startProcess(u.t, u.addr, u.bin, "-addr", u.addr)
}

// kill ends the process with SIGKILL: no shutdown, every stream cut.
func (u *upstreamProcess) kill(t *testing.T) {
	t.Helper()
	if err := u.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-u.proc.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed upstream did not exit")
	}
}

func TestUpstreamKilled(t *testing.T) {
	t.Parallel()
	up := startUpstreamProcess(t)
	gw := startGateway(t, gatewayOptions{Upstream: up.addr, Directives: upstreamFaultDirectives})
	faults := []struct {
		name   string
		outage time.Duration
	}{
		{"killed and restarted at once", 0},
		{"killed, down for 5s", 5 * time.Second},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			load := startFaultLoad(t, gw.URL, func(string) string { return "" }, "slow_echo", 2, 4)
			waitFor(t, 60*time.Second, "the load to create tasks before the fault", func() bool { return load.count() >= 8 })
			up.kill(t)
			time.Sleep(f.outage)
			up.start()
			back := time.Now()
			// Recovered: a new session of either version runs a call to
			// its end through the same Caddy.
			var recovery time.Duration
			waitFor(t, 60*time.Second, "a call of each version to complete after the upstream is back", func() bool {
				if !callCompletes(t, gw.URL, "", true) || !callCompletes(t, gw.URL, "", false) {
					return false
				}
				recovery = time.Since(back)
				return true
			})
			after := load.count()
			waitFor(t, 60*time.Second, "the load to go on after the fault", func() bool { return load.count() >= after+8 })
			load.halt()
			fc := load.settle(gw.URL, 60*time.Second)
			load.report("upstream "+f.name, fc, recovery)
			if dir := os.Getenv("MCP_TASKS_FAULT_LOGS"); dir != "" {
				_ = os.WriteFile(filepath.Join(dir, "caddy.log"), []byte(gw.logs()), 0o600)
			}
			for outcome, n := range fc.outcomes {
				if strings.HasPrefix(outcome, "failed ") && !upstreamFailureExplained(outcome) {
					t.Errorf("%d tasks failed without a clear reason: %q", n, outcome)
				}
			}
			if fc.outcomes["completed "] == 0 {
				t.Errorf("no task completed: outcomes %v", fc.outcomes)
			}
			if gw.proc.Exited() {
				t.Fatalf("Caddy ended:\n%s", tail(gw.logs(), 3000))
			}
		})
	}
}

// upstreamFailureExplained reports whether a failed task's message says
// what happened to its upstream call.
func upstreamFailureExplained(outcome string) bool {
	for _, s := range []string{"upstream", "session"} {
		if strings.Contains(strings.ToLower(outcome), s) {
			return true
		}
	}
	return false
}

// callCompletes makes one short task of the given version, on a new
// session for 2025-11-25, with token ("" for none), and reports whether it
// completed.
func callCompletes(t *testing.T, url, token string, v2025 bool) bool {
	t.Helper()
	probe := &faultLoad{t: t, url: url, token: func(string) string { return token }, tool: "slow_echo", secs: 0.5,
		accepted: map[string]string{}, refused: map[string]int{}}
	session := ""
	if v2025 {
		status, header, m, err := probe.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"probe","version":"1"}}}`,
			"probe", map[string]string{})
		if session = header.Get("Mcp-Session-Id"); err != nil || status != http.StatusOK || m == nil || m.Error != nil || session == "" {
			return false
		}
		if _, _, _, err := probe.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "probe",
			map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}); err != nil {
			return false
		}
	}
	probe.create("probe", session, 0)
	probe.mu.Lock()
	var id string
	for k := range probe.accepted {
		id = k
	}
	probe.mu.Unlock()
	if id == "" {
		return false
	}
	mc := newV2026Client(t, url, true)
	if token != "" {
		mc.header.Set("Authorization", "Bearer "+token)
	}
	status, _ := waitTaskEnded(mc, id, time.Now().Add(30*time.Second))
	return status == "completed"
}
