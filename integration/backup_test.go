package integration

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An online backup of a running gateway's Badger store, restored into a
// new directory, serves the same tasks: caddy mcp-tasks backup while the
// gateway runs (and goes on serving), caddy mcp-tasks restore offline, a
// new Caddy on the restored directory answers tasks/get and tasks/result
// as the first one did. A task created after the backup is not in it; one
// running at the backup is recovered as after a crash.
func TestOnlineBackupRestore(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	alice := newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	alice.initialize("")
	var done []v2025Task
	for i := range 3 {
		tk := alice.createTask("slow_compute", map[string]any{"seconds": 0.01, "label": "kept" + string(rune('a'+i))}, 3600000)
		done = append(done, tk)
	}
	results := map[string]string{}
	for _, tk := range done {
		waitFor(t, 30*time.Second, "a quick task to complete", func() bool { return alice.getTask(tk.TaskID).Status == "completed" })
		m := alice.call("tasks/result", map[string]string{"taskId": tk.TaskID})
		if m.Error != nil {
			t.Fatalf("tasks/result: %+v", m.Error)
		}
		results[tk.TaskID] = string(m.Result)
	}
	running := alice.createTask("slow_compute", map[string]any{"seconds": 3600}, 3600000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 4); err != nil {
		t.Fatal(err)
	}

	backup := filepath.Join(t.TempDir(), "mcp_tasks.bak")
	out, errOut, ok := runCaddy(t, "mcp-tasks", "backup", "--address", gw.adminAddr, "--output", backup)
	if !ok || !strings.Contains(out, "written to "+backup) {
		t.Fatalf("backup of a running gateway: ok=%v\n%s\n%s", ok, out, errOut)
	}
	// The gateway served on: a task created after the backup.
	later := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 3600000)
	if got := alice.getTask(running.TaskID); got.Status != "working" {
		t.Errorf("the running task after the backup: %s", got.Status)
	}

	restored := filepath.Join(t.TempDir(), "restored")
	out, errOut, ok = runCaddy(t, "mcp-tasks", "restore", "--input", backup, "--storage-dir", restored)
	if !ok || !strings.Contains(out, "restored") {
		t.Fatalf("restore: ok=%v\n%s\n%s", ok, out, errOut)
	}
	// A restore never merges into a store.
	if _, errOut, ok := runCaddy(t, "mcp-tasks", "restore", "--input", backup, "--storage-dir", restored); ok || !strings.Contains(errOut, "not empty") {
		t.Errorf("restore into a used directory: ok=%v %s", ok, errOut)
	}

	gw2 := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth, StorageDir: restored})
	alice2 := newRPCClient(t, gw2.URL)
	alice2.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	alice2.initialize("")
	for _, tk := range done {
		got := alice2.getTask(tk.TaskID)
		if got.Status != "completed" || got.CreatedAt != tk.CreatedAt {
			t.Errorf("restored task %s: %+v, want completed, created %s", tk.TaskID, got, tk.CreatedAt)
		}
		m := alice2.call("tasks/result", map[string]string{"taskId": tk.TaskID})
		if m.Error != nil || !sameJSON(string(m.Result), results[tk.TaskID]) {
			t.Errorf("restored tasks/result of %s: %s %+v, want %s", tk.TaskID, m.Result, m.Error, results[tk.TaskID])
		}
	}
	waitFor(t, 30*time.Second, "the task running at the backup to be recovered", func() bool {
		return alice2.getTask(running.TaskID).Status == "failed"
	})
	if m := alice2.call("tasks/get", map[string]string{"taskId": later.TaskID}); m.Error == nil {
		t.Errorf("a task created after the backup is in it: %s", m.Result)
	}
	// Another principal sees none of them: the owner binding is restored too.
	bob := newRPCClient(t, gw2.URL)
	bob.header.Set("Authorization", "Bearer "+hmacToken(t, "bob", "t1"))
	bob.initialize("")
	if m := bob.call("tasks/get", map[string]string{"taskId": done[0].TaskID}); m.Error == nil {
		t.Errorf("bob reads alice's restored task: %s", m.Result)
	}
}

// The backup of a PostgreSQL store is pg_dump's: the command and the admin
// route refuse it with a message that says so, and write no file.
func TestBackupRefusedForPostgres(t *testing.T) {
	t.Parallel()
	dsn, _ := testDatabase(t)
	_, addr := testUpstream(t)
	gw := startPostgresGateway(t, addr, dsn, v2025Tools)
	waitFor(t, 60*time.Second, "health", func() bool {
		_, _, ok := runCaddy(t, "mcp-tasks", "health", "--address", gw.adminAddr)
		return ok
	})
	backup := filepath.Join(t.TempDir(), "pg.bak")
	_, errOut, ok := runCaddy(t, "mcp-tasks", "backup", "--address", gw.adminAddr, "--output", backup)
	if ok || !strings.Contains(errOut, "501") || !strings.Contains(errOut, "pg_dump") {
		t.Errorf("backup of a PostgreSQL store: ok=%v\n%s", ok, errOut)
	}
	if _, err := os.Stat(backup); !os.IsNotExist(err) {
		t.Errorf("a refused backup left a file: %v", err)
	}
	noErrorLogged(t, gw.gateway, "501")
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
