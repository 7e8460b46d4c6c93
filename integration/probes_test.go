package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The probes of a service manager or an orchestrator on the real Caddy's
// admin endpoint: /mcp_tasks/health/live answers while the admin API does,
// /mcp_tasks/health/ready only while every store can take tasks and the
// process is not draining; caddy mcp-tasks health --live / --ready exit 0
// or 1 the same way.

type readyAnswer struct {
	Ready    bool     `json:"ready"`
	Draining bool     `json:"draining"`
	Why      []string `json:"why"`
}

// probeReady asks the readiness route and decodes its answer, whatever
// the status.
func probeReady(t *testing.T, adminAddr string) (int, readyAnswer, string) {
	t.Helper()
	code, body := adminDo(t, adminAddr, http.MethodGet, "/mcp_tasks/health/ready", nil)
	var a readyAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("health/ready: decoding %s: %v", body, err)
	}
	return code, a, body
}

// checkLive checks the liveness route and command: the process serves.
func checkLive(t *testing.T, adminAddr string) {
	t.Helper()
	if code, body := adminDo(t, adminAddr, http.MethodGet, "/mcp_tasks/health/live", nil); code != http.StatusOK || !strings.Contains(body, `"live":true`) {
		t.Errorf("health/live = %d %s, want 200 live", code, body)
	}
	if out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--live", "--address", adminAddr); !ok || strings.TrimSpace(out) != "live" {
		t.Errorf("caddy mcp-tasks health --live: ok=%v %q %s, want exit 0 and live", ok, out, errOut)
	}
}

// checkNotReady checks that the readiness route answers 503 naming why
// (want) and that the command fails with it.
func checkNotReady(t *testing.T, adminAddr, want string) {
	t.Helper()
	code, a, body := probeReady(t, adminAddr)
	if code != http.StatusServiceUnavailable || a.Ready || len(a.Why) == 0 || !strings.Contains(strings.Join(a.Why, "\n"), want) {
		t.Errorf("health/ready = %d %s, want 503 saying %q", code, body, want)
	}
	if out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--ready", "--address", adminAddr); ok || !strings.Contains(errOut, "503") || !strings.Contains(errOut, want) {
		t.Errorf("caddy mcp-tasks health --ready: ok=%v %q %s, want exit 1 with 503 and %q", ok, out, errOut, want)
	}
}

func TestHealthProbes(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)

	t.Run("ready with Badger", func(t *testing.T) {
		t.Parallel()
		gw := startGateway(t, gatewayOptions{Upstream: addr})
		waitFor(t, 30*time.Second, "health/ready to answer 200", func() bool {
			code, _, _ := probeReady(t, gw.adminAddr)
			return code == http.StatusOK
		})
		if _, a, body := probeReady(t, gw.adminAddr); !a.Ready || a.Draining || len(a.Why) != 0 {
			t.Errorf("health/ready = %s, want ready with no reasons", body)
		}
		checkLive(t, gw.adminAddr)
		if m := gw.metrics(); !strings.Contains(m, "\ncaddy_mcp_tasks_ready 1\n") {
			t.Errorf("metrics of a ready gateway:\n%s\nwant caddy_mcp_tasks_ready 1", grepLines(m, "caddy_mcp_tasks_ready"))
		}
		if out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--ready", "--address", gw.adminAddr); !ok || strings.TrimSpace(out) != "ready" {
			t.Errorf("caddy mcp-tasks health --ready: ok=%v %q %s, want exit 0 and ready", ok, out, errOut)
		}
		if out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--ready", "--json", "--address", gw.adminAddr); !ok || !strings.Contains(out, `"ready":true`) {
			t.Errorf("caddy mcp-tasks health --ready --json: ok=%v %q %s", ok, out, errOut)
		}
		if _, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--ready", "--store", gw.opts.StorageDir, "--address", gw.adminAddr); ok || !strings.Contains(errOut, "drop --store") {
			t.Errorf("health --ready --store: ok=%v %s, want a refusal", ok, errOut)
		}
		for _, name := range []string{"live", "ready"} {
			if code, body := adminDo(t, gw.adminAddr, http.MethodPost, "/mcp_tasks/health/"+name, nil); code != http.StatusMethodNotAllowed || !strings.Contains(body, "use GET") {
				t.Errorf("POST health/%s = %d %s, want 405", name, code, body)
			}
		}
	})

	// A store another process holds cannot open: not ready, still live;
	// ready again once the store opens, with no MCP request.
	t.Run("store unavailable", func(t *testing.T) {
		t.Parallel()
		dir, release := heldStore(t)
		gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: dir})
		checkNotReady(t, gw.adminAddr, "not open")
		checkLive(t, gw.adminAddr)
		if m := gw.metrics(); !strings.Contains(m, "\ncaddy_mcp_tasks_ready 0\n") {
			t.Errorf("metrics while the store cannot open:\n%s\nwant caddy_mcp_tasks_ready 0", grepLines(m, "caddy_mcp_tasks_ready"))
		}
		release()
		waitFor(t, 30*time.Second, "health/ready to turn 200", func() bool {
			code, _, _ := probeReady(t, gw.adminAddr)
			return code == http.StatusOK
		})
	})

	// A stopping process (caddy stop, within shutdown_delay) drains: not
	// ready, so an orchestrator sends no more work; still live, so it is
	// not killed before its tasks finish.
	t.Run("draining", func(t *testing.T) {
		t.Parallel()
		gw := startCaddyfile(t, drainSite(filepath.Join(t.TempDir(), "store"), addr, "\tshutdown_delay 60s\n"))
		waitFor(t, 30*time.Second, "health/ready to answer 200", func() bool {
			code, _, _ := probeReady(t, gw.adminAddr)
			return code == http.StatusOK
		})
		stop := exec.Command(caddyBinary, "stop", "--address", gw.adminAddr)
		stop.Env = append(os.Environ(), gw.env()...)
		if err := stop.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stop.Process.Kill(); _ = stop.Wait() })
		waitFor(t, 30*time.Second, "health/ready to say it drains", func() bool {
			code, a, _ := probeReady(t, gw.adminAddr)
			return code == http.StatusServiceUnavailable && a.Draining
		})
		checkNotReady(t, gw.adminAddr, "draining")
		checkLive(t, gw.adminAddr)
		if m := gw.metrics(); !strings.Contains(m, "\ncaddy_mcp_tasks_ready 0\n") {
			t.Errorf("metrics while draining:\n%s\nwant caddy_mcp_tasks_ready 0", grepLines(m, "caddy_mcp_tasks_ready"))
		}
	})
}
