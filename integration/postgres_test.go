package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// The PostgreSQL store configured from a Caddyfile (storage postgres), end
// to end: the real Caddy, a real PostgreSQL, the go-sdk upstream.

// postgresGateway is a Caddy whose tasks live in PostgreSQL.
type postgresGateway struct {
	*gateway
	dsn string
}

// startPostgresGateway writes a Caddyfile with storage postgres (its DSN
// from the environment, as an operator keeps it out of the file) and runs
// the real Caddy on it.
func startPostgresGateway(t *testing.T, upstream, dsn, directives string) *postgresGateway {
	t.Helper()
	g := &postgresGateway{gateway: &gateway{t: t, addr: freeAddr(t), adminAddr: freeAddr(t), home: t.TempDir()}, dsn: dsn}
	g.URL = "http://" + g.addr + "/mcp"
	g.config = filepath.Join(g.home, "Caddyfile")
	g.opts.Upstream = upstream
	g.write(directives)
	g.start()
	return g
}

func (g *postgresGateway) write(directives string) {
	g.t.Helper()
	cfg := globalHead(g.adminAddr, "\tgrace_period 10s") + fmt.Sprintf(`
http://:%s {
	bind 127.0.0.1
%s	mcp_tasks /mcp* {
		storage postgres {
			dsn       {env.MCP_TASKS_DSN}
			max_conns 8
		}
%s
	}
	reverse_proxy /mcp* %s
}
`, g.port(), indent(g.opts.SiteDirectives, "\t"), indent(directives, "\t\t"), g.opts.Upstream)
	if err := os.WriteFile(g.config, []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

func (g *postgresGateway) env() []string { return append(g.gateway.env(), "MCP_TASKS_DSN="+g.dsn) }

func (g *postgresGateway) start() {
	g.t.Helper()
	g.proc = startProcessEnv(g.t, g.env(), g.addr, caddyBinary, "run", "--config", g.config, "--adapter", "caddyfile")
}

// reload rewrites the mcp_tasks block and runs caddy reload.
func (g *postgresGateway) reload(directives string) {
	g.t.Helper()
	g.write(directives)
	cmd := exec.Command(caddyBinary, "reload", "--config", g.config, "--adapter", "caddyfile", "--address", g.adminAddr)
	cmd.Env = append(os.Environ(), g.env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		g.t.Fatalf("caddy reload: %v\n%s\ncaddy output:\n%s", err, out, tail(g.logs(), 4000))
	}
	forgetIdleConnections()
}

// stop runs caddy stop and waits for the process to exit.
func (g *postgresGateway) stop() {
	g.t.Helper()
	cmd := exec.Command(caddyBinary, "stop", "--address", g.adminAddr)
	cmd.Env = append(os.Environ(), g.env()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		g.t.Fatalf("caddy stop: %v\n%s", err, out)
	}
	select {
	case <-g.proc.done:
	case <-time.After(60 * time.Second):
		g.t.Fatal("caddy did not exit after caddy stop")
	}
}

// healthy waits for the admin health check to answer 200.
func (g *postgresGateway) healthy(what string) {
	g.t.Helper()
	waitFor(g.t, 60*time.Second, what, func() bool {
		code, _ := adminDo(g.t, g.adminAddr, "GET", "/mcp_tasks/health", nil)
		return code == http.StatusOK
	})
}

// gatewayBackends returns the server pids of the gateway's connections,
// which carry the application name the test put in the DSN.
func gatewayBackends(t *testing.T, db *pgx.Conn) []int {
	t.Helper()
	rows, err := db.Query(context.Background(),
		"SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mcp-tasks-e2e' ORDER BY pid")
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// Tasks of both protocol eras live in PostgreSQL: created, polled and read
// through the gateway; caddy reload keeps the store and its connection pool;
// the admin API names the store without its password, lists its tasks, and
// health answers 503 while the database refuses connections; after a
// restart of the Caddy process the finished tasks are still served.
func TestPostgresStorage(t *testing.T) {
	t.Parallel()
	dsn, db := testDatabase(t)
	dsn = withDSNParam(t, dsn, "application_name", "mcp-tasks-e2e")
	// The throwaway cluster trusts local connections, so the password is
	// never asked for; it is there to be kept out of logs and the admin API.
	secret := ""
	if os.Getenv(pgtest.EnvDSN) == "" {
		secret = "pw-6b1d9e-not-for-logs"
		dsn = withDSNParam(t, dsn, "password", secret)
	}
	up, upAddr := testUpstream(t)
	gw := startPostgresGateway(t, upAddr, dsn, v2025Tools+"task_after 300ms")
	gw.healthy("the PostgreSQL store to open")

	var stores []struct {
		Store   string `json:"store"`
		Backend string `json:"backend"`
		Open    bool   `json:"open"`
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/stores", &stores); code != http.StatusOK ||
		len(stores) != 1 || stores[0].Backend != "postgres" || !stores[0].Open || !strings.HasPrefix(stores[0].Store, "postgres:mcp_tasks@") {
		t.Fatalf("stores = %d %s, want one open postgres store", code, body)
	}
	storeName := stores[0].Store
	if secret != "" && (strings.Contains(storeName, secret) || !strings.Contains(storeName, "password=xxxxx")) {
		t.Errorf("store name %q, want the DSN with its password masked", storeName)
	}

	// 2025-11-25: a task-augmented call, polled, its result.
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	v2025 := c.createTask("slow_compute", map[string]any{"seconds": 1, "label": "pg-legacy"}, 600000)
	if v2025.Status != "working" {
		t.Fatalf("created task = %+v", v2025)
	}
	if got := c.getTask(v2025.TaskID); got.Status != "working" && got.Status != "completed" {
		t.Errorf("tasks/get = %+v", got)
	}
	m := c.call("tasks/result", map[string]string{"taskId": v2025.TaskID})
	if m.Error != nil || !strings.Contains(string(m.Result), "pg-legacy") {
		t.Fatalf("tasks/result = %s %+v", m.Result, m.Error)
	}
	if got := c.getTask(v2025.TaskID); got.Status != "completed" {
		t.Errorf("after the result, tasks/get = %+v", got)
	}
	var status string
	if err := db.QueryRow(context.Background(), "SELECT status FROM mcp_tasks.tasks WHERE id = $1", v2025.TaskID).Scan(&status); err != nil || status != "completed" {
		t.Errorf("the task's row in PostgreSQL: %q, %v; want completed", status, err)
	}

	// 2026-07-28: a call that becomes a task, got until it completes.
	v2026 := newV2026Client(t, gw.URL, true)
	res := v2026.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1.5, "label": "pg-modern"}})
	if str(res["resultType"]) != "task" {
		t.Fatalf("tools/call = %v, want a task", res)
	}
	v2026ID := str(res["taskId"])
	if done := v2026.waitStatus(v2026ID, "completed"); !strings.Contains(string(done["result"]), "pg-modern") {
		t.Errorf("result = %s", done["result"])
	}

	// caddy reload: the new configuration uses the same store, runtime and
	// connection pool (the old one's connections are not closed).
	before := gatewayBackends(t, db)
	if len(before) == 0 {
		t.Fatal("no connections of the gateway in pg_stat_activity")
	}
	gw.reload(v2025Tools + "task_after 300ms\ndefault_ttl 20m")
	if got := c.getTask(v2025.TaskID); got.Status != "completed" {
		t.Errorf("after the reload, tasks/get = %+v", got)
	}
	again := newRPCClient(t, gw.URL)
	again.initialize("")
	afterReload := again.createTask("slow_compute", map[string]any{"seconds": 0.2, "label": "pg-reloaded"}, 600000)
	if m := again.call("tasks/result", map[string]string{"taskId": afterReload.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "pg-reloaded") {
		t.Errorf("a task after the reload: %s %+v", m.Result, m.Error)
	}
	// A new pool in place of the shared one would have closed every
	// connection of the old (its Cleanup closes it). One connection may
	// still go on its own: pgx closes a connection whose query's context
	// ended mid-flight, as the old configuration's may at the reload.
	after := gatewayBackends(t, db)
	kept := 0
	for _, pid := range before {
		if slices.Contains(after, pid) {
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("every connection of the gateway was closed by the reload (before %v, after %v): a new pool replaced the shared one", before, after)
	}
	if len(after) > 8 {
		t.Errorf("%d connections after the reload, want at most max_conns 8", len(after))
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/stores", &stores); code != http.StatusOK || len(stores) != 1 || stores[0].Store != storeName {
		t.Errorf("stores after the reload = %s, want the one store", body)
	}

	// Health: 503 naming the cause while the database refuses connections,
	// 200 again once it accepts them.
	ctx := context.Background()
	dbName := db.Config().Database
	postgresServerExec(t, "ALTER DATABASE "+pgx.Identifier{dbName}.Sanitize()+" WITH ALLOW_CONNECTIONS false")
	if _, err := db.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'mcp-tasks-e2e'"); err != nil {
		t.Fatal(err)
	}
	var h adminHealth
	code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
	_ = json.Unmarshal([]byte(body), &h) // adminDo decodes successes only
	if code != http.StatusServiceUnavailable || h.Healthy || len(h.Stores) != 1 || h.Stores[0].Reachable || h.Stores[0].Error == "" {
		t.Errorf("health with the database refusing connections = %d %s, want 503 naming the cause", code, body)
	}
	if secret != "" && strings.Contains(body, secret) {
		t.Errorf("health shows the DSN's password: %s", body)
	}
	postgresServerExec(t, "ALTER DATABASE "+pgx.Identifier{dbName}.Sanitize()+" WITH ALLOW_CONNECTIONS true")
	gw.healthy("health to come back with the database")

	// A restart of the Caddy process: the finished tasks are still there.
	gw.stop()
	firstLogs := gw.logs()
	gw.start()
	gw.healthy("the store to open after the restart")
	fresh := newRPCClient(t, gw.URL)
	fresh.initialize("")
	if got := fresh.getTask(v2025.TaskID); got.Status != "completed" {
		t.Errorf("after the restart, tasks/get = %+v", got)
	}
	if m := fresh.call("tasks/result", map[string]string{"taskId": v2025.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "pg-legacy") {
		t.Errorf("after the restart, tasks/result = %s %+v", m.Result, m.Error)
	}
	if got := newV2026Client(t, gw.URL, true).get(v2026ID); str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "pg-modern") {
		t.Errorf("after the restart, the 2026-07-28 task = %v", got)
	}
	if n := up.Calls("slow_compute"); n != 3 {
		t.Errorf("upstream ran slow_compute %d times, want 3 (nothing re-run)", n)
	}

	// The admin API lists the store's tasks, newest first.
	var page adminPage
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks", &page); code != http.StatusOK {
		t.Fatalf("admin list: %d %s", code, body)
	}
	if want := []string{afterReload.TaskID, v2026ID, v2025.TaskID}; fmt.Sprint(ids(page.Tasks)) != fmt.Sprint(want) || page.Store != storeName {
		t.Errorf("admin list = %+v, want %v in %s", page, want, storeName)
	}
	var v adminTaskView
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/"+v2025.TaskID+"?detail=1", &v); code != http.StatusOK ||
		v.Status != "completed" || v.Store != storeName || !strings.Contains(string(v.Result), "pg-legacy") {
		t.Errorf("admin show = %d %s", code, body)
	}
	var unknown json.RawMessage
	if code, _ := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/0000000000000000000000", &unknown); code != http.StatusNotFound {
		t.Errorf("admin show of an unknown id = %d, want 404", code)
	}
	// The store's gauges count the PostgreSQL store too.
	var metrics string
	waitFor(t, 30*time.Second, "the store gauges to count the tasks", func() bool {
		metrics = gw.metrics()
		return strings.Contains(metrics, "caddy_mcp_tasks_tasks_stored 3") && strings.Contains(metrics, "caddy_mcp_tasks_tasks_active 0")
	})
	if m := regexp.MustCompile(`(?m)^caddy_mcp_tasks_store_size_bytes (\S+)$`).FindStringSubmatch(metrics); m == nil || m[1] == "0" {
		t.Errorf("store size gauge missing or zero:\n%s", grepLines(metrics, "caddy_mcp_tasks"))
	}
	if secret != "" {
		for _, logs := range []string{firstLogs, gw.logs()} {
			if strings.Contains(logs, secret) {
				t.Errorf("Caddy logged the DSN's password:\n%s", grepLines(logs, secret))
			}
		}
	}
}

// A database that refuses connections when Caddy starts: Caddy serves
// anyway, health answers 503 with the cause (never the password), MCP
// requests get 503, and once the database accepts connections the health
// probe alone opens the store.
func TestPostgresStorageDownAtStart(t *testing.T) {
	t.Parallel()
	dsn, db := testDatabase(t)
	dsn = withDSNParam(t, dsn, "application_name", "mcp-tasks-e2e")
	secret := ""
	if os.Getenv(pgtest.EnvDSN) == "" {
		secret = "pw-down-at-start-3c0f"
		dsn = withDSNParam(t, dsn, "password", secret)
	}
	dbName := pgx.Identifier{db.Config().Database}.Sanitize()
	postgresServerExec(t, "ALTER DATABASE "+dbName+" WITH ALLOW_CONNECTIONS false")
	t.Cleanup(func() { postgresServerExec(t, "ALTER DATABASE "+dbName+" WITH ALLOW_CONNECTIONS true") })
	_, upAddr := testUpstream(t)
	gw := startPostgresGateway(t, upAddr, dsn, v2025Tools)

	// The store is opened when Caddy's "started" event fires, a moment
	// after the listener accepts: until then health says "not open yet".
	var (
		h    adminHealth
		code int
		body string
	)
	refused := func() bool {
		h = adminHealth{}
		code, body = adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
		_ = json.Unmarshal([]byte(body), &h)
		return len(h.Stores) == 1 && strings.Contains(h.Stores[0].Error, "not currently accepting connections")
	}
	waitFor(t, 30*time.Second, "health to report the database's refusal", refused)
	if code != http.StatusServiceUnavailable || h.Stores[0].Open {
		t.Errorf("health = %d %s, want 503 with the database's refusal", code, body)
	}
	c := newRPCClient(t, gw.URL)
	if status := c.send([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)); status != http.StatusServiceUnavailable {
		t.Errorf("an MCP request while the store cannot open: HTTP %d, want 503", status)
	}

	postgresServerExec(t, "ALTER DATABASE "+dbName+" WITH ALLOW_CONNECTIONS true")
	gw.healthy("the health probe to open the store")
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "late-db"}, 600000)
	if m := c.call("tasks/result", map[string]string{"taskId": task.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "late-db") {
		t.Errorf("tasks/result = %s %+v", m.Result, m.Error)
	}
	if secret != "" && (strings.Contains(body, secret) || strings.Contains(gw.logs(), secret)) {
		t.Errorf("the DSN's password shows in health or the logs:\n%s\n%s", body, grepLines(gw.logs(), secret))
	}
	if !strings.Contains(gw.logs(), "starting the task gateway") {
		t.Errorf("the failed start was not logged")
	}
}

// A database that stops answering (a network that drops packets, not one
// that refuses): the health probe still answers, 503 with the cause, rather
// than hanging as long as the connection does; when the network is back,
// health is 200 again.
func TestPostgresHealthUnansweringDatabase(t *testing.T) {
	t.Parallel()
	dsn, _ := testDatabase(t)
	hole, dsn := newPGBlackhole(t, dsn)
	_, upAddr := testUpstream(t)
	gw := startPostgresGateway(t, upAddr, dsn, v2025Tools)
	gw.healthy("the store to open through the blackhole")
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "hole"}, 600000)

	hole.freeze()
	var h adminHealth
	code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil) // httpClient gives up after 60s
	_ = json.Unmarshal([]byte(body), &h)
	if code != http.StatusServiceUnavailable || len(h.Stores) != 1 || h.Stores[0].Reachable || h.Stores[0].Error == "" {
		t.Errorf("health with the database unanswering = %d %s, want 503 naming the cause", code, body)
	}

	hole.thaw()
	gw.healthy("health to come back with the network")
	if got := c.getTask(task.TaskID); got.Status != "completed" && got.Status != "working" {
		t.Errorf("tasks/get after the network came back = %+v", got)
	}
}
