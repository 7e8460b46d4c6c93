package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// benchPostgres measures the PostgreSQL store: durable creates/s and
// tasks/get/s through one replica and through three behind a round-robin
// Caddy, beside pgbench's simple-update TPS on the same server in the same
// run (the anchor: what this server does with a small write transaction),
// and the same load on one Caddy with the Badger store (the reference of
// tasks/get).
// The server is a throwaway cluster (pgtest) with fsync and synchronous
// commit turned back on, so that a create is as durable as on a real
// server; MCP_TASKS_TEST_DSN names an existing server instead, used as it
// is configured.
func benchPostgres(cfg config) ([]row, error) {
	srv, err := pgtest.Start("")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	if os.Getenv(pgtest.EnvDSN) == "" {
		if err := restartDurable(srv.DSN); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to the bench server: %w", err)
	}
	defer admin.Close(ctx)
	var fsync, syncCommit string
	if err := admin.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &syncCommit); err != nil {
		return nil, fmt.Errorf("reading the server's settings: %w", err)
	}
	suffix := fmt.Sprintf("_%d", os.Getpid())
	newDB := func(name string) (string, error) {
		name += suffix
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return "", fmt.Errorf("creating database %s: %w", name, err)
		}
		return withDatabase(srv.DSN, name)
	}
	defer func() {
		for _, name := range []string{"bench_pgbench", "bench_one", "bench_three"} {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+suffix+" WITH (FORCE)")
		}
	}()

	pgbenchDSN, err := newDB("bench_pgbench")
	if err != nil {
		return nil, err
	}
	tps, err := runPgbench(pgbenchDSN, cfg.duration)
	if err != nil {
		return nil, err
	}

	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	measure := func(db string, replicas int) (creates, gets result, err error) {
		dsn, err := newDB(db)
		if err != nil {
			return result{}, result{}, err
		}
		url, stop, err := pgReplicas(cfg, dsn, up.addr, replicas)
		if err != nil {
			return result{}, result{}, err
		}
		defer stop()
		creates, ids, err := pgCreates(url, cfg.duration)
		if err != nil {
			return result{}, result{}, err
		}
		gets, err = pgGets(url, ids, cfg.duration)
		return creates, gets, err
	}
	c1, g1, err := measure("bench_one", 1)
	if err != nil {
		return nil, fmt.Errorf("one replica: %w", err)
	}
	c3, g3, err := measure("bench_three", 3)
	if err != nil {
		return nil, fmt.Errorf("three replicas: %w", err)
	}
	cb, gb, err := measureBadger(cfg, up.addr)
	if err != nil {
		return nil, fmt.Errorf("the Badger reference: %w", err)
	}
	server := fmt.Sprintf("PostgreSQL on this machine, fsync %s, synchronous_commit %s", fsync, syncCommit)
	return []row{
		{measure: fmt.Sprintf("postgres anchor: pgbench simple-update TPS (-N, %d clients, %s), %s", pgbenchClients, cfg.duration, server),
			result: fmt.Sprintf("%.0f TPS", tps), target: "report", informational: true},
		{measure: fmt.Sprintf("postgres: durable create (%d clients), tasks/s end to end, 1 replica vs 3 behind round robin (vs pgbench TPS)", pgClients),
			result: fmt.Sprintf("%.0f vs %.0f (%.2f× / %.2f× pgbench)", c1.rate(), c3.rate(), c1.rate()/tps, c3.rate()/tps),
			target: "1 replica ≥ 0.6× pgbench", met: c1.rate()/tps >= 0.6},
		{measure: "postgres: durable create p50 / p99, 1 replica vs 3",
			result: fmt.Sprintf("%s / %s vs %s / %s", ms(c1.pct(0.5)), ms(c1.pct(0.99)), ms(c3.pct(0.5)), ms(c3.pct(0.99))), target: "report", informational: true},
		{measure: fmt.Sprintf("postgres: tasks/get req/s (%d clients), 1 replica vs 3 behind round robin, vs one Caddy on Badger (sync_writes on) in the same run", pgClients),
			result: fmt.Sprintf("%.0f (p99 %s) vs %.0f (p99 %s); Badger %.0f (p99 %s): %.2f× Badger", g1.rate(), ms(g1.pct(0.99)), g3.rate(), ms(g3.pct(0.99)), gb.rate(), ms(gb.pct(0.99)), g1.rate()/gb.rate()),
			target: "1 replica ≥ 0.8× Badger", met: g1.rate()/gb.rate() >= 0.8},
		{measure: fmt.Sprintf("badger reference: durable create (%d clients, sync_writes on), tasks/s end to end, the same load", pgClients),
			result: fmt.Sprintf("%.0f (p50 %s, p99 %s)", cb.rate(), ms(cb.pct(0.5)), ms(cb.pct(0.99))), target: "report", informational: true},
	}, nil
}

const (
	pgClients      = 32 // HTTP clients of the gateway measurements
	pgbenchClients = 4
)

// restartDurable restarts the throwaway cluster of dsn (pgtest's layout:
// its data directory under the socket directory) with PostgreSQL's default
// durability: pgtest turns fsync, synchronous commit and full-page writes
// off on the server's command line, which no ALTER SYSTEM can override.
func restartDurable(dsn string) error {
	var dir, port string
	for _, f := range strings.Fields(dsn) {
		if v, ok := strings.CutPrefix(f, "host="); ok {
			dir = v
		}
		if v, ok := strings.CutPrefix(f, "port="); ok {
			port = v
		}
	}
	bin, err := pgtest.FindBinDir()
	if err != nil || dir == "" || port == "" {
		return fmt.Errorf("restarting the bench cluster durable (dsn %q): %v", dsn, err)
	}
	args := []string{filepath.Join(bin, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-w", "-t", "120", "-m", "fast", "restart",
		"-l", filepath.Join(dir, "server.log"), // else the server holds our output pipe open
		"-o", fmt.Sprintf("-p %s -k %s -c listen_addresses='' -c max_connections=200", port, dir)}
	cmd := exec.Command(args[0], args[1:]...)
	if os.Geteuid() == 0 { // the cluster belongs to postgres, as pgtest runs it
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
	}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl restart with durable settings: %w\n%s", err, out)
	}
	return nil
}

// runPgbench initializes pgbench's tables in the database of dsn and runs
// its simple-update script for d; it returns the TPS.
func runPgbench(dsn string, d time.Duration) (float64, error) {
	bin, err := pgtest.FindBinDir()
	pgbench := filepath.Join(bin, "pgbench")
	if err != nil {
		if pgbench, err = exec.LookPath("pgbench"); err != nil {
			return 0, fmt.Errorf("pgbench not found: %w", err)
		}
	}
	if out, err := exec.Command(pgbench, "-i", "-q", dsn).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	secs := max(1, int(d.Seconds()))
	out, err := exec.Command(pgbench, "-N", "-T", fmt.Sprint(secs), "-c", fmt.Sprint(pgbenchClients), "-j", "2", dsn).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no tps in pgbench's output:\n%s", out)
	}
	var tps float64
	_, err = fmt.Sscan(string(m[1]), &tps)
	return tps, err
}

// measureBadger measures the same creates and tasks/get through one Caddy on
// the Badger store, with sync_writes on so that a create is as durable: the
// reference of the tasks/get row.
func measureBadger(cfg config, upstream string) (creates, gets result, err error) {
	port := freePort()
	site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\tsync_writes on\n\t\tmax_active_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}",
		port, filepath.Join(cfg.work, "pg-badger-reference"), upstream)
	p, err := startCaddy(cfg.caddy, cfg.work, site, port)
	if err != nil {
		return result{}, result{}, err
	}
	defer p.stop()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	creates, ids, err := pgCreates(url, cfg.duration)
	if err != nil {
		return result{}, result{}, err
	}
	gets, err = pgGets(url, ids, cfg.duration)
	return creates, gets, err
}

// pgReplicas starts n Caddy processes, each a gateway on the PostgreSQL
// store of dsn, and for n > 1 a Caddy balancing round robin in front; it
// returns the MCP endpoint clients use.
func pgReplicas(cfg config, dsn, upstream string, n int) (string, func(), error) {
	var procs []*caddyProc
	stop := func() {
		for _, p := range procs {
			p.stop()
		}
	}
	var backends []string
	for range n {
		port := freePort()
		site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage postgres {\n\t\t\tdsn `%s`\n\t\t\tmax_conns 16\n\t\t}\n\t\tmax_active_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}",
			port, dsn, upstream)
		p, err := startCaddy(cfg.caddy, cfg.work, site, port)
		if err != nil {
			stop()
			return "", nil, err
		}
		procs = append(procs, p)
		backends = append(backends, fmt.Sprintf("127.0.0.1:%d", port))
	}
	front := backends[0]
	if n > 1 {
		port := freePort()
		site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\treverse_proxy %s {\n\t\tlb_policy round_robin\n\t\tflush_interval -1\n\t}\n}", port, strings.Join(backends, " "))
		p, err := startCaddy(cfg.caddy, cfg.work, site, port)
		if err != nil {
			stop()
			return "", nil, err
		}
		procs = append(procs, p)
		front = fmt.Sprintf("127.0.0.1:%d", port)
	}
	return "http://" + front + "/mcp", stop, nil
}

// pgCreates measures task creation through url (after a warm-up) and
// returns the ids of the tasks created.
func pgCreates(url string, d time.Duration) (result, []string, error) {
	c := newClient(pgClients)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	var mu sync.Mutex
	var ids []string
	create := func(int, int) error {
		data, err := post(c, url, body, headers)
		if err != nil {
			return err
		}
		var m struct {
			Result struct {
				Task struct{ TaskID string } `json:"task"`
			} `json:"result"`
		}
		if json.Unmarshal(data, &m) != nil || m.Result.Task.TaskID == "" {
			return fmt.Errorf("not a CreateTaskResult: %s", data)
		}
		mu.Lock()
		ids = append(ids, m.Result.Task.TaskID)
		mu.Unlock()
		return nil
	}
	closedLoop(pgClients, time.Second, create) // warm up: connections, plans
	r := closedLoop(pgClients, d, create)
	if r.errs > 0 {
		return r, nil, fmt.Errorf("%d failed creates", r.errs)
	}
	return r, ids, nil
}

// pgGets measures tasks/get of random tasks among ids through url.
func pgGets(url string, ids []string, d time.Duration) (result, error) {
	if len(ids) == 0 {
		return result{}, fmt.Errorf("no tasks to get")
	}
	c := newClient(pgClients)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	get := func(int, int) error {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, ids[rand.IntN(len(ids))])
		data, err := post(c, url, body, headers)
		if err == nil && !strings.Contains(string(data), `"status"`) {
			err = fmt.Errorf("not a task: %s", data)
		}
		return err
	}
	closedLoop(pgClients, time.Second, get)
	r := closedLoop(pgClients, d, get)
	if r.errs > 0 {
		return r, fmt.Errorf("%d failed tasks/get", r.errs)
	}
	return r, nil
}

// withDatabase returns dsn (URL or key=value form) naming database name.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the DSN: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	re := regexp.MustCompile(`\bdbname=\S+`)
	if re.MatchString(dsn) {
		return re.ReplaceAllString(dsn, "dbname="+name), nil
	}
	return dsn + " dbname=" + name, nil
}
