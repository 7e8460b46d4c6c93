package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// drainSite is a Caddyfile with grace_period 30s (and the extra global
// options) and one mcp_tasks route on a Badger store in dir.
func drainSite(dir, upstream, global string) func(admin, port string) string {
	return func(admin, port string) string {
		return globalHead(admin, "\tgrace_period 30s\n"+global) + "http://:" + port + " {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir " + dir +
			"\n" + indent(v2025Tools+"task_after 300ms", "\t\t") + "\n\t}\n\treverse_proxy /mcp* " + upstream + "\n}\n"
	}
}

// caddy stop with grace_period 30s and a 10 s task of each protocol
// running: the process waits for the tasks, which complete with their real
// results (not failed at the next start as after a crash), and exits once
// they are done.
func TestStopDrainsRunningTasks(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	config := drainSite(filepath.Join(t.TempDir(), "store"), addr, "")
	gw := startCaddyfile(t, config)
	v2025 := newRPCClient(t, gw.URL)
	v2025.initialize("")
	v2025ID := v2025.createTask("slow_compute", map[string]any{"seconds": 10, "label": "drained-2025"}, 600000).TaskID
	res := newV2026Client(t, gw.URL, true).ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 10, "label": "drained-2026"}})
	if str(res["resultType"]) != "task" {
		t.Fatalf("the 2026-07-28 call answered %v, want a task", res)
	}
	v2026ID := str(res["taskId"])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 2); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if out, err := exec.Command(caddyBinary, "stop", "--address", gw.adminAddr).CombinedOutput(); err != nil {
		t.Fatalf("caddy stop: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "caddy to exit", gw.proc.Exited)
	t.Logf("caddy stop with two 10 s tasks running and grace_period 30s: the process exited %s after the stop", time.Since(start).Round(100*time.Millisecond))
	if n := up.Cancellations("slow_compute"); n != 0 {
		t.Errorf("the upstream saw %d calls cancelled, want none", n)
	}

	again := startCaddyfile(t, config)
	lc := newRPCClient(t, again.URL)
	lc.initialize("")
	if got := lc.getTask(v2025ID); got.Status != "completed" {
		t.Errorf("the 2025-11-25 task after the stop: %s %q, want completed", got.Status, got.StatusMessage)
	}
	if m := lc.call("tasks/result", map[string]string{"taskId": v2025ID}); m.Error != nil || !strings.Contains(string(m.Result), "drained-2025") {
		t.Errorf("the 2025-11-25 task's result: %s %+v", m.Result, m.Error)
	}
	if got := newV2026Client(t, again.URL, true).get(v2026ID); str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "drained-2026") {
		b, _ := json.Marshal(got)
		t.Errorf("the 2026-07-28 task after the stop: %s", b)
	}
	if n := up.Calls("slow_compute"); n != 2 {
		t.Errorf("the upstream ran slow_compute %d times, want 2 (nothing re-run)", n)
	}
}

// While a stopping process still serves (shutdown_delay, for the balancer
// to take it out of rotation), a call that would become a task gets HTTP
// 503 with Retry-After and a JSON-RPC error saying to retry, and reaches no
// upstream; the health check says it drains; the running task is still
// served, and finishes.
func TestStopRefusesNewTasks(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startCaddyfile(t, drainSite(filepath.Join(t.TempDir(), "store"), addr, "\tshutdown_delay 20s\n"))
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	running := c.createTask("slow_compute", map[string]any{"seconds": 3, "label": "before-stop"}, 600000).TaskID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}

	stop := exec.Command(caddyBinary, "stop", "--address", gw.adminAddr)
	stop.Env = append(os.Environ(), gw.env()...)
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop.Process.Kill(); _ = stop.Wait() }()
	waitFor(t, 30*time.Second, "the shutdown to be scheduled", func() bool { return strings.Contains(gw.logs(), "shutdown scheduled") })

	body, _ := jsonrpc.RequestBytes(json.RawMessage(`7`), "tools/call", map[string]any{
		"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "after-stop"}, "task": map[string]any{"ttl": 60000}})
	resp, err := httpClient.Do(c.newRequest(context.Background(), body))
	if err != nil {
		t.Fatal(err)
	}
	var m jsonrpc.Message
	_ = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || m.Error == nil ||
		!strings.Contains(m.Error.Message, "stopping and takes no new tasks") || string(m.ID) != "7" {
		t.Errorf("a task call while stopping: HTTP %d, Retry-After %q, %+v; want 503 with Retry-After and the stopping error", resp.StatusCode, resp.Header.Get("Retry-After"), m.Error)
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, `"draining":true`) {
		t.Errorf("health while stopping: %d %s, want 503 saying it drains", code, body)
	}
	if got := c.getTask(running); got.Status != "working" && got.Status != "completed" {
		t.Errorf("the running task while stopping: %s %q", got.Status, got.StatusMessage)
	}
	waitFor(t, 60*time.Second, "the running task to complete", func() bool { return c.getTask(running).Status == "completed" })
	if n := up.Calls("slow_compute"); n != 1 {
		t.Errorf("the upstream ran slow_compute %d times, want 1 (the refused call never reached it)", n)
	}
}

// The README's balancer in front of two gateways retries the 503 of the
// one that stops on the other: every call becomes a task there, and the
// client sees only its CreateTaskResult.
func TestBalancerRetriesStoppingReplica(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	a := startCaddyfile(t, drainSite(filepath.Join(t.TempDir(), "a"), addr, "\tshutdown_delay 20s\n"))
	b := startCaddyfile(t, drainSite(filepath.Join(t.TempDir(), "b"), addr, ""))
	lbAddr := freeAddr(t)
	startMultiSite(t, readmeBalancer(t, lbAddr, a.addr, b.addr), lbAddr)
	url := "http://" + lbAddr + "/mcp"

	stop := exec.Command(caddyBinary, "stop", "--address", a.adminAddr)
	stop.Env = append(os.Environ(), a.env()...)
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop.Process.Kill(); _ = stop.Wait() }()
	waitFor(t, 30*time.Second, "replica a's shutdown to be scheduled", func() bool { return strings.Contains(a.logs(), "shutdown scheduled") })

	const calls = 4 // round robin: half of them go to replica a first
	onB := newV2026Client(t, b.URL, true)
	for i := range calls {
		res := newV2026Client(t, url, true).ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": fmt.Sprint("retried-", i)}})
		id := str(res["taskId"])
		if str(res["resultType"]) != "task" || id == "" {
			t.Fatalf("call %d through the balancer answered %v, want a task", i, res)
		}
		if got := onB.get(id); str(got["taskId"]) != id {
			t.Errorf("task %d is not on replica b, where the balancer should have sent it: %v", i, got)
		}
	}
	if n := up.Calls("slow_compute"); n != calls {
		t.Errorf("the upstream ran slow_compute %d times, want %d (once per call)", n, calls)
	}
}

// readmeBalancer is the README's balancer site, listening on addr in
// front of the backends.
func readmeBalancer(t *testing.T, addr string, backends ...string) string {
	t.Helper()
	block := readmeBlock(t, "# on the balancer")
	block = strings.Replace(block, "10.0.1.1:8080 10.0.1.2:8080 10.0.1.3:8080", strings.Join(backends, " "), 1)
	block = strings.Replace(block, ":80 {", "http://"+addr+" {\n\tbind 127.0.0.1", 1)
	if !strings.Contains(block, addr) || !strings.Contains(block, backends[0]) {
		t.Fatalf("the README's balancer block changed shape: %s", block)
	}
	return block
}

// Takeover between two replicas on one PostgreSQL store, timed for the
// README: a replica killed with SIGKILL leaves its task to the other once
// the lease runs out (default 30s, smallest 2s); a replica stopped with a
// drain shorter than the task releases the lease and announces it, so the
// other takes over at once, even with the longest lease (10m), whose
// takeover pass comes only every 3m20s. In every case the other replica
// runs the task again (retry_on_restart) to its real result.
func TestReplicaTakeoverTimes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, directives string
		kill             bool
		within           time.Duration // the deadline of the takeover, not an expected figure
	}{
		{"kill -9, lease 2s", "lease 2s", true, 60 * time.Second},
		{"caddy stop, drain 2s, lease 10m", "lease 10m\ndrain 2s", false, 60 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkReplicaTakeover(t, tt.name, tt.directives, tt.kill, tt.within)
		})
	}
}

// The default lease's takeover takes the longest of the package (the lease,
// then up to one takeover pass, then the task's re-run): a test of its own,
// without subtests, so that it waits for a free slot of -parallel once
// rather than twice.
func TestReplicaTakeoverDefaultLease(t *testing.T) {
	t.Parallel()
	checkReplicaTakeover(t, "kill -9, default lease", "", true, 90*time.Second)
}

// checkReplicaTakeover runs a task on replica a, kills or stops a, and
// waits for replica b to take the task over within the deadline and run it
// to its real result.
func checkReplicaTakeover(t *testing.T, name, directives string, kill bool, within time.Duration) {
	t.Helper()
	_, upAddr := testUpstream(t)
	dsn, _ := testDatabase(t)
	a := startPostgresGateway(t, upAddr, dsn, replicaDirectives+directives)
	b := startPostgresGateway(t, upAddr, dsn, replicaDirectives+directives)
	a.healthy("replica a's store to open")
	b.healthy("replica b's store to open")
	mc := newV2026Client(t, a.URL, true)
	mc.header.Set("Authorization", "Bearer "+hmacToken(t, "takeover", "t1"))
	res := mc.ok("tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"seconds": 8, "label": "taken-over"}})
	id := str(res["taskId"])
	if str(res["resultType"]) != "task" || id == "" {
		t.Fatalf("the call answered %v, want a task", res)
	}
	waitFor(t, 30*time.Second, "replica a to run the task", func() bool { return holds(t, b, id, a) })

	gone := time.Now() // the kill, or the start of caddy stop
	if kill {
		killGateway(t, a.gateway)
	} else {
		a.stop() // returns once the process exited
	}
	exited := time.Now()
	waitFor(t, within, "replica b to take the task over", func() bool { return holds(t, b, id, b) })
	t.Logf("%s: replica b took the task over %s after replica a was killed or told to stop (%s after its process ended)", name,
		time.Since(gone).Round(100*time.Millisecond), time.Since(exited).Round(100*time.Millisecond))

	mb := newV2026Client(t, b.URL, true)
	mb.header.Set("Authorization", mc.header.Get("Authorization"))
	var got map[string]json.RawMessage
	waitFor(t, 60*time.Second, "the task to end on replica b", func() bool {
		got = mb.get(id)
		return str(got["status"]) != "working"
	})
	if _, has := got["statusMessage"]; str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "taken-over") || has {
		b, _ := json.Marshal(got)
		t.Errorf("the task after the takeover: %s, want completed with its result and no statusMessage", b)
	}
	if err := rerunCompleted(t, b.adminAddr, id, rerunAfterTakeover); err != nil {
		t.Error(err)
	}
}

// holds reports whether the lease of task id is held by replica owner, as
// replica by's admin API shows it.
func holds(t *testing.T, by *postgresGateway, id string, owner *postgresGateway) bool {
	t.Helper()
	var v replicaTask
	if code, _ := adminDo(t, by.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK {
		return false
	}
	return strings.Contains(v.LeaseHolder+"/", fmt.Sprintf("/p%d/", owner.proc.Cmd.Process.Pid))
}
