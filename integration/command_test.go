package integration

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runCaddy runs the real caddy binary with args and returns its stdout,
// stderr and whether it exited 0.
func runCaddy(t *testing.T, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(caddyBinary, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exited *exec.ExitError
	if err != nil && !errors.As(err, &exited) {
		t.Fatalf("caddy %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), err == nil
}

// caddy mcp-tasks list, show, cancel and health against a running gateway:
// tables for people, --json for scripts, the admin address from --address
// or from the config file, errors with a non-zero exit.
func TestCommandMCPTasks(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	waitFor(t, 30*time.Second, "health", func() bool {
		_, _, ok := runCaddy(t, "mcp-tasks", "health", "--address", gw.adminAddr)
		return ok
	})
	alice := newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	alice.initialize("")
	quick := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
	waitFor(t, 30*time.Second, "the quick task to complete", func() bool { return alice.getTask(quick.TaskID).Status == "completed" })
	slow := alice.createTask("slow_compute", map[string]any{"seconds": 60}, 60000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 2); err != nil {
		t.Fatal(err)
	}

	t.Run("list table", func(t *testing.T) {
		out, errOut, ok := runCaddy(t, "mcp-tasks", "list", "--address", gw.adminAddr)
		if !ok {
			t.Fatalf("list failed: %s", errOut)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "STATUS") ||
			!strings.HasPrefix(lines[1], slow.TaskID) || !strings.Contains(lines[1], "working") || !strings.Contains(lines[1], "alice") ||
			!strings.HasPrefix(lines[2], quick.TaskID) || !strings.Contains(lines[2], "completed") {
			t.Errorf("list table:\n%s", out)
		}
		// The tenant stands beside the subject: the same subject under two
		// tenants is two principals.
		head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(head) < 4 || head[2] != "PRINCIPAL" || head[3] != "TENANT" || len(row) < 4 || row[3] != "t1" {
			t.Errorf("list table without the tenant beside the subject:\n%s", out)
		}
	})

	t.Run("list table, address from the config", func(t *testing.T) {
		// Only the table: not Caddy's log lines about loading the config.
		out, errOut, ok := runCaddy(t, "mcp-tasks", "list", "--config", gw.config, "--adapter", "caddyfile")
		if !ok || errOut != "" || !strings.HasPrefix(out, "ID ") || strings.Count(strings.TrimSpace(out), "\n") != 2 {
			t.Errorf("list --config printed more than the table: ok=%v\nstdout:\n%s\nstderr:\n%s", ok, out, errOut)
		}
	})

	t.Run("list json with a filter, address from the config", func(t *testing.T) {
		out, errOut, ok := runCaddy(t, "mcp-tasks", "list", "--config", gw.config, "--adapter", "caddyfile", "--status", "completed", "--json")
		if !ok {
			t.Fatalf("list --json failed: %s", errOut)
		}
		var page adminPage
		if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != quick.TaskID {
			t.Errorf("list --json --status completed = %s (%v)", out, err)
		}
	})

	t.Run("paging", func(t *testing.T) {
		out, _, ok := runCaddy(t, "mcp-tasks", "list", "--address", gw.adminAddr, "--limit", "1", "--tool", "slow_compute")
		i := strings.Index(out, "more: caddy mcp-tasks list ")
		if !ok || i < 0 {
			t.Fatalf("list --limit 1:\n%s", out)
		}
		// The hint is the command for the next page of this listing: the
		// same admin address, filter and limit, and the cursor.
		hint := strings.Fields(out[i+len("more: caddy "):])
		for _, want := range []string{"--address " + gw.adminAddr, "--limit 1", "--tool slow_compute", "--cursor "} {
			if !strings.Contains(strings.Join(hint, " ")+" ", want) {
				t.Errorf("next page hint %q lacks %q", hint, want)
			}
		}
		out, errOut, ok := runCaddy(t, hint...)
		if !ok || !strings.Contains(out, quick.TaskID) || strings.Contains(out, slow.TaskID) {
			t.Errorf("second page, from the hint %q:\n%s\n%s", hint, out, errOut)
		}
	})

	t.Run("show", func(t *testing.T) {
		out, errOut, ok := runCaddy(t, "mcp-tasks", "show", quick.TaskID, "--address", gw.adminAddr, "--detail")
		if !ok || !strings.Contains(out, "id:") || !strings.Contains(out, quick.TaskID) || !strings.Contains(out, "status:") ||
			!strings.Contains(out, "completed") || !strings.Contains(out, "result:") || !strings.Contains(out, "working -> completed") {
			t.Errorf("show:\n%s\n%s", out, errOut)
		}
		out, errOut, ok = runCaddy(t, "mcp-tasks", "show", "no-such-task", "--address", gw.adminAddr)
		if ok || !strings.Contains(errOut, "404") || !strings.Contains(errOut, "not found") {
			t.Errorf("show of an unknown id: ok=%v\n%s\n%s", ok, out, errOut)
		}
		noErrorLogged(t, gw, "404")
	})

	t.Run("cancel", func(t *testing.T) {
		out, errOut, ok := runCaddy(t, "mcp-tasks", "cancel", slow.TaskID, "--address", gw.adminAddr)
		if !ok || strings.TrimSpace(out) != "task "+slow.TaskID+": cancelled" {
			t.Fatalf("cancel: %q %s", out, errOut)
		}
		if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
			t.Fatalf("the upstream never saw the cancellation: %v", err)
		}
		out, errOut, ok = runCaddy(t, "mcp-tasks", "cancel", slow.TaskID, "--address", gw.adminAddr, "--json")
		if ok || !strings.Contains(errOut, "409") {
			t.Errorf("second cancel: ok=%v %s %s", ok, out, errOut)
		}
		noErrorLogged(t, gw, "409")
	})

	t.Run("health", func(t *testing.T) {
		out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--address", gw.adminAddr)
		if !ok || !strings.Contains(out, "STORE") || !strings.Contains(out, gw.opts.StorageDir) {
			t.Errorf("health:\n%s\n%s", out, errOut)
		}
	})

	// Where no Caddy answers, the error says which address was tried and
	// where it came from.
	t.Run("no admin endpoint", func(t *testing.T) {
		nobody := freeAddr(t)
		_, errOut, ok := runCaddy(t, "mcp-tasks", "list", "--address", nobody)
		if ok || !strings.Contains(errOut, "admin endpoint at "+nobody+" (from --address): is Caddy running there?") {
			t.Errorf("list against an address nobody listens on: ok=%v %s", ok, errOut)
		}
		config := filepath.Join(t.TempDir(), "Caddyfile")
		if err := os.WriteFile(config, []byte("{\n\tadmin "+nobody+"\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, ok = runCaddy(t, "mcp-tasks", "list", "--config", config)
		if ok || !strings.Contains(errOut, "admin endpoint at "+nobody+" (from "+config+": its admin option") {
			t.Errorf("list with a config whose admin address nobody listens on: ok=%v %s", ok, errOut)
		}
	})
}

// noErrorLogged fails when Caddy logged an admin API answer at error level:
// a refused operator request (an unknown task, one already ended) is the
// caller's mistake, not the server's failure an on-call engineer must see.
// Caddy logs every admin request it receives: once a later request's line
// is in the output, so is any line about the earlier one.
func noErrorLogged(t *testing.T, gw *gateway, status string) {
	t.Helper()
	marker := "/mcp_tasks/stores?after=" + status
	adminDo(t, gw.adminAddr, http.MethodGet, marker, nil)
	waitFor(t, 10*time.Second, "the admin log line of "+marker, func() bool { return strings.Contains(gw.logs(), marker) })
	for line := range strings.SplitSeq(gw.logs(), "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, `"logger":"admin.api"`) {
			t.Errorf("the admin API's %s answer is logged at error: %s", status, line)
		}
	}
}
