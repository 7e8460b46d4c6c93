package integration

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Badger backend written as a storage module, and its storage_dir
// shorthand naming the same store.
func TestBadgerStorageModule(t *testing.T) {
	t.Parallel()
	_, upAddr := testUpstream(t)
	dir := filepath.Join(t.TempDir(), "tasks")
	site := func(port, storage string) string {
		return "\nhttp://:" + port + " {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n" + storage + "\t}\n\treverse_proxy /mcp* " + upAddr + "\n}\n"
	}
	module := "\t\tstorage badger {\n\t\t\tdir " + dir + "\n\t\t\tsync_writes off\n\t\t}\n"
	gw := startCaddyfile(t, func(admin, port string) string { return globalHead(admin, "\tgrace_period 10s") + site(port, module) })
	waitFor(t, 30*time.Second, "the store to open", func() bool {
		code, _ := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
		return code == http.StatusOK
	})
	checkStores := func(when string) {
		t.Helper()
		var stores []struct {
			Store   string `json:"store"`
			Backend string `json:"backend"`
			Open    bool   `json:"open"`
		}
		if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/stores", &stores); code != http.StatusOK ||
			len(stores) != 1 || stores[0].Store != dir || stores[0].Backend != "badger" || !stores[0].Open {
			t.Errorf("%s: stores = %s, want the open badger store %s", when, body, dir)
		}
	}
	checkStores("storage badger")
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		t.Errorf("the store is not in the configured dir: %v", err)
	}

	c := newRPCClient(t, gw.URL)
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.2, "label": "badger-module"}, 600000)
	if m := c.call("tasks/result", map[string]string{"taskId": task.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "badger-module") {
		t.Fatalf("tasks/result = %s %+v", m.Result, m.Error)
	}

	// The shorthand names the same store: the reload keeps it open (a
	// second runtime could not open the directory Badger holds locked).
	shorthand := "\t\tstorage_dir " + dir + "\n\t\tsync_writes off\n"
	if err := os.WriteFile(gw.config, []byte(globalHead(gw.adminAddr, "\tgrace_period 10s")+site(gw.port(), shorthand)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBinary, "reload", "--config", gw.config, "--adapter", "caddyfile", "--address", gw.adminAddr)
	cmd.Env = append(os.Environ(), gw.env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("caddy reload: %v\n%s", err, out)
	}
	forgetIdleConnections()
	if got := c.getTask(task.TaskID); got.Status != "completed" {
		t.Errorf("after the reload to storage_dir, tasks/get = %+v", got)
	}
	checkStores("storage_dir")
	if strings.Contains(gw.logs(), "starting the task gateway") {
		t.Errorf("the reloaded configuration could not start its store (another runtime held it):\n%s", grepLines(gw.logs(), "starting the task gateway"))
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil); code != http.StatusOK {
		t.Errorf("health after the reload = %d %s", code, body)
	}
}

// The manual's storage postgres site (the one with schema mcp_tasks) is valid for the built Caddy, and
// caddy validate accepts a database that does not answer (the DSN names a
// port nobody serves): it may be up by the time Caddy runs.
func TestReadmeStoragePostgresValidates(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(config, []byte(readmeBlock(t, "schema mcp_tasks")), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddyBinary, "validate", "--config", config, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "MCP_TASKS_DSN=postgres://gw:pw-readme@127.0.0.1:1/tasks?connect_timeout=1", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("caddy validate of the README's storage postgres example: %v\n%s", err, out)
	}
	cmd = exec.Command(caddyBinary, "validate", "--config", config, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "MCP_TASKS_DSN=", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "dsn") {
		t.Errorf("caddy validate without the DSN: %v\n%s, want an error about the dsn", err, out)
	}
}
