//go:build linux

package integration

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Badger store's filesystem taken away under steady load of both
// protocol versions: a filesystem that fills up and is later given space,
// and one the kernel turns read-only after an error. While it lasts new
// tasks are refused with a clear, retryable answer and Caddy keeps
// serving (Badger maps its files: unguarded, its next write to a full or
// read-only filesystem is a SIGBUS that ends the process); no acknowledged
// task is lost.

// diskFaultFor is how long a disk fault lasts: longer than the gateway
// retries an outcome write (about six seconds) before keeping it for later.
const diskFaultFor = 10 * time.Second

// badgerFaultDirectives configure the gateway of the Badger fault tests.
const badgerFaultDirectives = v2025Tools + `
tool slow_echo optional
task_after 300ms
max_active_per_principal 1000
rate_limit 1000
`

// TestBadgerDiskFull: the store's filesystem (a 160 MiB tmpfs) fills up
// while tasks run, and is given space after diskFaultFor.
func TestBadgerDiskFull(t *testing.T) {
	t.Parallel()
	mnt := mountFS(t, "-t", "tmpfs", "-o", "size=160m", "tmpfs")
	_, upAddr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: upAddr, StorageDir: filepath.Join(mnt, "store"), Directives: badgerFaultDirectives})
	load := startFaultLoad(t, gw.URL, func(string) string { return "" }, "slow_echo", 3, 4)
	waitFor(t, 60*time.Second, "the load to create tasks before the fault", func() bool { return load.count() >= 8 })

	// Fill the filesystem to below the store's reserve, as another
	// program's files would.
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler, err := os.Create(filepath.Join(mnt, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if err := syscall.Fallocate(int(filler.Fd()), 0, 0, free-4<<20); err != nil {
		t.Fatalf("filling the filesystem: %v", err)
	}
	_ = filler.Close()
	full := time.Now()
	probeRefused(t, gw.URL)
	// The health check says so too: a balancer sends new tasks elsewhere.
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil); code != http.StatusServiceUnavailable || !strings.Contains(body, `"writable":false`) {
		t.Errorf("health while the disk is full: HTTP %d %s, want 503 and writable false", code, body)
	}
	time.Sleep(diskFaultFor - time.Since(full))
	if gw.proc.Exited() {
		t.Fatalf("Caddy ended while the store's filesystem was full:\n%s", tail(gw.logs(), 3000))
	}
	if err := os.Remove(filepath.Join(mnt, "filler")); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()

	waitFor(t, 60*time.Second, "a task to be accepted once there is space", func() bool { return load.acceptedSince(freed) })
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil); code != http.StatusOK {
		t.Errorf("health once there is space: HTTP %d %s, want 200", code, body)
	}
	recovery := time.Since(freed)
	after := load.count()
	waitFor(t, 60*time.Second, "the load to go on after the fault", func() bool { return load.count() >= after+8 })
	load.halt()
	fc := load.settle(gw.URL, 60*time.Second)
	load.report("disk full", fc, recovery)
	for outcome, n := range fc.outcomes {
		if outcome != "completed " {
			t.Errorf("disk full: %d tasks ended %q, want every call's own outcome (completed) kept and written", n, outcome)
		}
	}
	if gw.proc.Exited() {
		t.Errorf("Caddy ended:\n%s", tail(gw.logs(), 3000))
	}
}

// probeRefused checks that a new task is refused promptly, with 503,
// Retry-After and the store's unavailability named.
func probeRefused(t *testing.T, url string) {
	t.Helper()
	probe := &faultLoad{t: t, url: url, token: func(string) string { return "" }}
	var last string
	deadline := time.Now().Add(promptBound)
	for {
		status, header, m, err := probe.post(v2026Body(1, "tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"seconds": 1}}),
			"probe", v2026Headers("tools/call", "slow_echo"))
		if err != nil {
			t.Fatalf("a new task during the fault: %v", err)
		}
		if status == 503 && header.Get("Retry-After") != "" && m != nil && m.Error != nil &&
			strings.HasPrefix(m.Error.Message, "task store unavailable; retry later") {
			return
		}
		last = fmt.Sprintf("HTTP %d, Retry-After %q, %+v", status, header.Get("Retry-After"), m)
		if m != nil && m.Error != nil {
			last += " " + m.Error.Message
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new task during the fault: %s, want HTTP 503 with Retry-After and the store's unavailability", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBadgerReadOnly: the kernel turns the store's filesystem (ext4 on a
// loop device, errors=remount-ro) read-only after an error while tasks
// run. Such a filesystem takes writes again only after fsck and a new
// mount, so Caddy is stopped, the filesystem repaired and remounted, and
// Caddy started again on it: every task acknowledged before is there.
func TestBadgerReadOnly(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skipf("a loop device for the store needs root (uid %d)", os.Geteuid())
	}
	image := filepath.Join(t.TempDir(), "store.img")
	if err := os.WriteFile(image, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(image, 256<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", image).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 for the store's filesystem: %v %s", err, out)
	}
	out, err := exec.Command("losetup", "-f", "--show", image).CombinedOutput()
	if err != nil {
		t.Skipf("this machine does not give the test a loop device (losetup: %v %s)", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	_ = exec.Command("blockdev", "--setrw", loop).Run()
	mnt := mountFS(t, "-o", "errors=remount-ro", loop)
	trigger := "/sys/fs/ext4/" + filepath.Base(loop) + "/trigger_fs_error"
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("this kernel cannot be asked for an ext4 error: %v", err)
	}

	_, upAddr := testUpstream(t)
	store := filepath.Join(mnt, "store")
	gw := startGateway(t, gatewayOptions{Upstream: upAddr, StorageDir: store, Directives: badgerFaultDirectives})
	load := startFaultLoad(t, gw.URL, func(string) string { return "" }, "slow_echo", 3, 4)
	waitFor(t, 60*time.Second, "the load to create tasks before the fault", func() bool { return load.count() >= 8 })

	if err := os.WriteFile(trigger, []byte("fault test"), 0o200); err != nil {
		t.Fatalf("asking for an ext4 error: %v", err)
	}
	turned := time.Now()
	if err := os.WriteFile(filepath.Join(mnt, "check"), nil, 0o600); err == nil {
		t.Fatal("the filesystem still takes writes after the error")
	}
	probeRefused(t, gw.URL)
	time.Sleep(diskFaultFor - time.Since(turned))
	if gw.proc.Exited() {
		t.Fatalf("Caddy ended while the store's filesystem was read-only:\n%s", tail(gw.logs(), 3000))
	}
	load.halt()

	// Repair: stop Caddy, fsck, mount again, start Caddy on the same store.
	// Caddy must stop on its own (SIGINT, as caddy stop does): Badger
	// retries its memtable flush for ever on a read-only filesystem, and
	// the store's close gives up on it after a bound.
	stopped := time.Now()
	if err := gw.proc.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gw.proc.done:
		t.Logf("read-only filesystem: Caddy stopped in %s", time.Since(stopped).Round(time.Millisecond))
	case <-time.After(90 * time.Second): // a bound, not a measure: a hang
		t.Errorf("Caddy did not stop on a read-only store:\n%s", tail(gw.logs(), 3000))
		killGateway(t, gw)
	}
	if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	if out, err := exec.Command("e2fsck", "-fy", loop).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() > 2 { // 1 and 2: errors corrected
			t.Fatalf("e2fsck: %v %s", err, out)
		}
	}
	if out, err := exec.Command("mount", "-o", "errors=remount-ro", loop, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting again: %v %s", err, out)
	}
	remounted := time.Now()
	gw2 := startGateway(t, gatewayOptions{Upstream: upAddr, StorageDir: store, Directives: badgerFaultDirectives})
	again := startFaultLoad(t, gw2.URL, func(string) string { return "" }, "slow_echo", 0.5, 2)
	waitFor(t, 60*time.Second, "a task to be accepted after the repair", func() bool { return again.acceptedSince(remounted) })
	recovery := time.Since(remounted)
	again.halt()
	fc := load.settle(gw2.URL, 60*time.Second)
	load.report("read-only filesystem", fc, recovery)
	for outcome, n := range fc.outcomes {
		if outcome != "completed " && !strings.Contains(outcome, "gateway restarted") {
			t.Errorf("read-only filesystem: %d tasks ended %q, want completed, or failed by the restart", n, outcome)
		}
	}
	if fc := again.settle(gw2.URL, 60*time.Second); fc.lost != 0 {
		t.Errorf("after the repair: %d tasks lost", fc.lost)
	}
}
