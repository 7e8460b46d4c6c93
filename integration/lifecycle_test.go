package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The configuration lifecycle: provisioning a configuration (caddy
// validate, a reload that fails) has no side effects on the task store or
// on the settings in charge; the store opens and recovery runs when a
// configuration starts serving, and each task is recovered through the
// route that created it.

// caddyValidate runs `caddy validate` on a Caddyfile with gw's environment.
func caddyValidate(t *testing.T, gw *gateway, config string) (string, error) {
	t.Helper()
	cmd := exec.Command(caddyBinary, "validate", "--config", config, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), gw.env()...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// storeState opens the task store in this process (Caddy must not run on
// it) and returns its lease holder name and the active tasks by id. Opening
// the store counts as one open (the epoch in the holder name).
func storeState(t *testing.T, dir string) (holder string, active map[string]*task.Task) {
	t.Helper()
	s, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	defer s.Close()
	active = map[string]*task.Task{}
	tasks, _, err := s.ListActive(context.Background(), "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range tasks {
		active[tk.ID] = tk
	}
	epoch, _, _ := strings.Cut(s.Holder(), "/")
	return epoch, active
}

// caddy validate succeeds while another Caddy serves the same storage
// directory (it used to fail on Badger's directory lock).
func TestValidateWhileRunning(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
	if out, err := caddyValidate(t, gw, gw.config); err != nil {
		t.Fatalf("caddy validate while caddy runs: %v\n%s", err, out)
	}
	c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
	if got := c.getTask(tk.TaskID); got.Status != "completed" {
		t.Errorf("task after the validate: %+v", got)
	}
}

// With Caddy stopped, caddy validate leaves the store as it is: a task that
// was working stays working, and the store's open count does not move. The
// next real start recovers it.
func TestValidateLeavesStoreAlone(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	store := filepath.Join(t.TempDir(), "store")
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 120}, 600000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}
	killGateway(t, gw)

	epoch1, before := storeState(t, store)
	if before[tk.TaskID] == nil || before[tk.TaskID].Status != task.StatusWorking {
		t.Fatalf("task before validate: %+v", before[tk.TaskID])
	}
	if out, err := caddyValidate(t, gw, gw.config); err != nil {
		t.Fatalf("caddy validate: %v\n%s", err, out)
	}
	epoch2, after := storeState(t, store)
	if got := after[tk.TaskID]; got == nil || got.Status != task.StatusWorking || got.StatusMessage != before[tk.TaskID].StatusMessage {
		t.Errorf("task after validate: %+v, want it working as before", got)
	}
	var n1, n2 int
	if _, err := fmt.Sscanf(epoch1, "e%d", &n1); err != nil {
		t.Fatalf("store epoch %q: %v", epoch1, err)
	}
	if _, err := fmt.Sscanf(epoch2, "e%d", &n2); err != nil {
		t.Fatalf("store epoch %q: %v", epoch2, err)
	}
	if n2 != n1+1 {
		t.Errorf("store opened as %s, then %s after validate: validate opened the store", epoch1, epoch2)
	}

	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: v2025Tools})
	c2 := newRPCClient(t, gw2.URL)
	c2.initialize("")
	waitFor(t, 30*time.Second, "the restart to fail the orphan", func() bool {
		return c2.getTask(tk.TaskID).Status == "failed"
	})
}

// A reload whose configuration fails to provision leaves the old
// configuration in charge: its sweep schedule keeps deleting expired tasks
// and its poll interval is still answered.
func TestFailedReloadKeepsOldSettings(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "sweep_interval 200ms"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")

	// The new config: other settings, and a second handler that cannot be
	// provisioned (its key file does not exist), after the first one (a
	// shorter path sorts later).
	bad := fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
}

http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
		sweep_interval 1h
		poll_interval 7s
%s	}
	mcp_tasks /z* {
		storage_dir %s
		auth jwt {
			public_key %s
			issuer https://idp.example
			audience gw
		}
	}
	reverse_proxy /mcp* %s
}
`, gw.adminAddr, gw.port(), gw.opts.StorageDir, indent(v2025Tools, "\t\t"), gw.opts.StorageDir,
		filepath.Join(t.TempDir(), "missing.pem"), addr)
	badFile := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(badFile, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(caddyBinary, "adapt", "--config", badFile, "--adapter", "caddyfile").CombinedOutput(); err != nil {
		t.Fatalf("the new config must adapt (it fails later, in provisioning): %v\n%s", err, out)
	}
	cmd := exec.Command(caddyBinary, "reload", "--config", badFile, "--adapter", "caddyfile", "--address", gw.adminAddr)
	cmd.Env = append(os.Environ(), gw.env()...)
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("reload of a config that cannot be provisioned succeeded:\n%s", out)
	}

	tk := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 1000)
	if tk.PollInterval != 1000 {
		t.Errorf("poll interval after the failed reload: %d, want the old 1000", tk.PollInterval)
	}
	c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
	waitFor(t, 20*time.Second, "the old config's sweep to delete the expired task", func() bool {
		m := c.call("tasks/get", map[string]string{"taskId": tk.TaskID})
		return m.Error != nil && strings.Contains(m.Error.Message, "expired")
	})
}

// twoSites is a Caddyfile with two sites on one storage directory, each in
// front of its own upstream with its own retry_on_restart list.
func twoSites(admin, portA, portB, store, upA, upB string) string {
	return fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
	grace_period 10s
}

http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
		tool slow_echo optional retry_on_restart
		tool slow_compute optional retry_on_restart
	}
	reverse_proxy /mcp* %s
}

http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
		tool slow_echo optional retry_on_restart
		tool slow_compute optional
	}
	reverse_proxy /mcp* %s
}
`, admin, portA, store, upA, portB, store, upB)
}

// After a SIGKILL, each task is re-run through the site that created it,
// reaching that site's upstream, under that site's retry_on_restart list;
// it used to go through whichever site served a request first.
func TestRestartRerunsThroughOwnRoute(t *testing.T) {
	t.Parallel()
	upA, addrA := testUpstream(t)
	upB, addrB := testUpstream(t)
	home := t.TempDir()
	store := filepath.Join(home, "store")
	gw := &gateway{t: t, home: home, addr: freeAddr(t), adminAddr: freeAddr(t)}
	siteB := freeAddr(t)
	port := func(a string) string { return a[strings.LastIndexByte(a, ':')+1:] }
	config := filepath.Join(home, "Caddyfile")
	if err := os.WriteFile(config, []byte(twoSites(gw.adminAddr, port(gw.addr), port(siteB), store, addrA, addrB)), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() {
		gw.proc = startProcessEnv(t, gw.env(), gw.addr, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
		waitFor(t, 30*time.Second, "site B to listen", func() bool {
			resp, err := httpClient.Get("http://" + siteB + "/")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		})
	}
	start()
	urlA, urlB := "http://"+gw.addr+"/mcp", "http://"+siteB+"/mcp"
	a, b := newRPCClient(t, urlA), newRPCClient(t, urlB)
	a.initialize("")
	b.initialize("")
	echoA := a.createTask("slow_echo", map[string]any{"seconds": 4, "label": "a"}, 600000)
	echoB := b.createTask("slow_echo", map[string]any{"seconds": 4, "label": "b"}, 600000)
	computeB := b.createTask("slow_compute", map[string]any{"seconds": 120, "label": "b"}, 600000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, w := range []struct {
		up   upstreamObserver
		tool string
	}{{upA, "slow_echo"}, {upB, "slow_echo"}, {upB, "slow_compute"}} {
		if err := w.up.WaitCalls(ctx, w.tool, 1); err != nil {
			t.Fatal(err)
		}
	}
	killGateway(t, gw)

	start()
	// Site A serves first: the old gateway ran every re-run through it.
	a2 := newRPCClient(t, urlA)
	a2.initialize("")
	waitFor(t, 60*time.Second, "site A's task to complete", func() bool { return a2.getTask(echoA.TaskID).Status == "completed" })
	b2 := newRPCClient(t, urlB)
	b2.initialize("")
	waitFor(t, 60*time.Second, "site B's tasks to end", func() bool {
		return b2.getTask(echoB.TaskID).Status == "completed" && b2.getTask(computeB.TaskID).Status == "failed"
	})
	if got := b2.getTask(computeB.TaskID); got.StatusMessage != "gateway restarted while the call was running; the upstream result is unknown" {
		t.Errorf("site B's slow_compute (not retry_on_restart there): %+v", got)
	}
	if n := upA.Calls("slow_echo"); n != 2 {
		t.Errorf("upstream A ran slow_echo %d times, want 2 (its task, once re-run)", n)
	}
	if n := upB.Calls("slow_echo"); n != 2 {
		t.Errorf("upstream B ran slow_echo %d times, want 2 (its task, once re-run)", n)
	}
	if n := upA.Calls("slow_compute") + upB.Calls("slow_compute"); n != 1 {
		t.Errorf("slow_compute ran %d times, want 1 (not re-run: site B does not retry it)", n)
	}
}
