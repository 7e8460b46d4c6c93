package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// PostgreSQL taken away under three replicas of the real Caddy while they
// create tasks of both protocol versions: a fast restart, a crash
// (immediate) restart, an outage, every backend of the gateways killed,
// the LISTEN connections killed. During the fault requests get a prompt
// answer, never a hang; afterwards, without restarting Caddy, everything
// works again, events between replicas included, and no acknowledged task
// is lost.

// pgOutage is how long the outage lasts in the default run; the issue's
// 30 s (pgOutageLong) runs with MCP_TASKS_LONG_FAULTS=1. Either outlasts a
// lease renewal (10 s), so that workers cannot renew their leases
// meanwhile; the long one outlasts a lease (30 s).
const (
	pgOutage     = 12 * time.Second
	pgOutageLong = 30 * time.Second
)

// envLongFaults runs the long versions of the fault tests.
const envLongFaults = "MCP_TASKS_LONG_FAULTS"

// faultDirectives configure every replica of the fault tests alike; the
// quota and rate stay out of the way of the load.
const faultDirectives = v2025Tools + hmacAuth + `
trust_domain replicas-e2e
tool slow_echo optional
task_after 300ms
max_active_per_principal 1000
rate_limit 1000
`

// pgFault is one fault: inject takes the database away (or part of it),
// checks what must hold while it lasts, ends it and returns when it ended.
type pgFault struct {
	name   string
	inject func(t *testing.T, f *pgFaultCluster) time.Time
}

// pgFaultCluster is the replicas on a PostgreSQL server of the test's own,
// which it may stop and restart.
type pgFaultCluster struct {
	*replicaCluster
	srv    *pgtest.Server
	dbDSN  string // the test's database, as its administrator
	tokens sync.Map
}

// token returns a bearer token of subject (safe from the load's goroutines).
func (f *pgFaultCluster) token(subject string) string {
	if tok, ok := f.tokens.Load(subject); ok {
		return tok.(string)
	}
	tok := hmacToken(f.t, subject, "t1")
	f.tokens.Store(subject, tok)
	return tok
}

func TestPostgresFaults(t *testing.T) {
	t.Parallel()
	if os.Getenv(pgtest.EnvDSN) != "" {
		t.Skipf("the fault tests stop and restart PostgreSQL: they need a throwaway cluster, not the server of %s", pgtest.EnvDSN)
	}
	// Durable commits: the crash restart must not lose what the gateway
	// acknowledged because the throwaway cluster trades durability for speed.
	srv, err := pgtest.StartDurable("")
	if err != nil {
		t.Fatalf("PostgreSQL for the fault tests: %v", err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE faults"); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close(ctx)
	dbDSN := withDatabase(t, srv.DSN, "faults")
	dsn := withDSNParam(t, dbDSN, "application_name", "mcp-tasks-e2e")
	f := &pgFaultCluster{replicaCluster: startReplicaClusterOn(t, 3, dsn, faultDirectives), srv: srv, dbDSN: dbDSN}
	f.token("load-0") // the first token, on the test's goroutine

	outage := pgOutage
	if os.Getenv(envLongFaults) != "" {
		outage = pgOutageLong
	}
	faults := []pgFault{
		{"fast restart", func(t *testing.T, f *pgFaultCluster) time.Time {
			if err := f.srv.Restart("fast"); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}},
		{"immediate restart", func(t *testing.T, f *pgFaultCluster) time.Time {
			if err := f.srv.Restart("immediate"); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}},
		{fmt.Sprintf("outage of %s", outage), func(t *testing.T, f *pgFaultCluster) time.Time {
			if err := f.srv.StopServer("fast"); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			f.duringOutage(t)
			time.Sleep(outage - time.Since(began))
			if err := f.srv.StartServer(); err != nil {
				t.Fatal(err)
			}
			return time.Now()
		}},
		{"backends killed", func(t *testing.T, f *pgFaultCluster) time.Time {
			n := f.terminate(t, "application_name = 'mcp-tasks-e2e'")
			t.Logf("pg_terminate_backend ended %d connections of the replicas", n)
			if n < len(f.nodes) {
				t.Errorf("killed %d backends, want at least one per replica", n)
			}
			return time.Now()
		}},
		{"LISTEN connections killed", func(t *testing.T, f *pgFaultCluster) time.Time {
			listening := "application_name = 'mcp-tasks-e2e' AND query ILIKE 'LISTEN %'"
			before := f.pids(t, listening)
			if len(before) != len(f.nodes) {
				t.Errorf("%d LISTEN connections before the fault, want one per replica", len(before))
			}
			f.terminate(t, listening)
			waitFor(t, 60*time.Second, "every replica to LISTEN again on a new connection", func() bool {
				after := f.pids(t, listening)
				for pid := range after {
					if before[pid] {
						return false
					}
				}
				return len(after) == len(f.nodes)
			})
			return time.Now()
		}},
	}
	for _, fault := range faults {
		t.Run(fault.name, func(t *testing.T) { f.run(t, fault) })
	}
}

// run puts the cluster under load, injects the fault, and checks recovery,
// events between replicas and the count.
func (f *pgFaultCluster) run(t *testing.T, fault pgFault) { //nolint:thelper // each fault's subtest body, not a helper: failures keep their own lines
	load := startFaultLoad(t, f.URL, f.token, "slow_echo", 1.5, 4)
	waitFor(t, 60*time.Second, "the load to create tasks before the fault", func() bool { return load.count() >= 8 })
	ended := fault.inject(t, f)
	var healthy time.Duration
	waitFor(t, 90*time.Second, "every replica to be healthy and a task to be accepted after the fault", func() bool {
		for _, g := range f.nodes {
			if code, _ := adminDo(t, g.adminAddr, "GET", "/mcp_tasks/health", nil); code != http.StatusOK {
				return false
			}
		}
		if healthy == 0 {
			healthy = time.Since(ended)
		}
		return load.acceptedSince(ended)
	})
	recovery := time.Since(ended)
	after := load.count()
	waitFor(t, 60*time.Second, "the load to go on after the fault", func() bool { return load.count() >= after+8 })
	load.halt()
	fc := load.settle(f.URL, 90*time.Second)
	f.crossReplicaCancel(t)
	t.Logf("%s: health 200 on every replica %s after the fault ended", fault.name, healthy.Round(10*time.Millisecond))
	load.report(fault.name, fc, recovery)
	if dir := os.Getenv("MCP_TASKS_FAULT_LOGS"); dir != "" { // for looking into a failure
		for i, g := range f.nodes {
			_ = os.WriteFile(fmt.Sprintf("%s/replica-%d.log", dir, i), []byte(g.logs()), 0o600)
		}
	}
	for outcome, n := range fc.outcomes {
		if outcome != "completed " {
			// No replica stopped, and the database kept every write it
			// acknowledged: every call completes.
			t.Errorf("%s: %d tasks ended %q, want every task completed", fault.name, n, outcome)
		}
	}
}

// duringOutage checks what holds while the database is down: each
// replica's health is 503, and a request gets a prompt retryable answer.
func (f *pgFaultCluster) duringOutage(t *testing.T) {
	t.Helper()
	for i, g := range f.nodes {
		waitFor(t, promptBound, fmt.Sprintf("replica %d's health to answer 503", i), func() bool {
			code, _ := adminDo(t, g.adminAddr, "GET", "/mcp_tasks/health", nil)
			return code == http.StatusServiceUnavailable
		})
	}
	probe := &faultLoad{t: t, url: f.URL, token: f.token}
	status, header, m, err := probe.post(v2026Body(1, "tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"seconds": 1}}),
		"probe", v2026Headers("tools/call", "slow_echo"))
	switch {
	case err != nil:
		t.Errorf("a request during the outage: %v, want a prompt answer", err)
	case status == http.StatusServiceUnavailable && header.Get("Retry-After") != "":
	case status == http.StatusOK && m != nil && m.Error != nil:
		t.Logf("a request during the outage: JSON-RPC error %d %s", m.Error.Code, m.Error.Message)
	default:
		t.Errorf("a request during the outage: HTTP %d %+v, want 503 with Retry-After or a JSON-RPC error", status, m)
	}
}

// crossReplicaCancel checks that a cancel sent to one replica reaches a
// call running on another.
func (f *pgFaultCluster) crossReplicaCancel(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mc := newV2026Client(t, f.URL, true)
	mc.header.Set("Authorization", "Bearer "+f.token("canceller"))
	calls, cancels := f.up.Calls("slow_compute"), f.up.Cancellations("slow_compute")
	m, status := mc.request(ctx, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
	if m.Error != nil {
		t.Fatalf("tools/call after the fault: HTTP %d %+v", status, m.Error)
	}
	var created struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(m.Result, &created); err != nil || created.TaskID == "" {
		t.Fatalf("tools/call after the fault answered %s, want a task", m.Result)
	}
	id := created.TaskID
	if err := f.up.WaitCalls(ctx, "slow_compute", calls+1); err != nil {
		t.Fatal(err)
	}
	i := f.runningOn(id)
	if i < 0 {
		t.Fatalf("no replica runs task %s", id)
	}
	other := newV2026Client(t, "http://"+f.nodes[(i+1)%len(f.nodes)].addr+"/mcp", true)
	other.header.Set("Authorization", "Bearer "+f.token("canceller"))
	if m, status := other.request(ctx, "tasks/cancel", map[string]any{"taskId": id}); m.Error != nil {
		t.Fatalf("tasks/cancel on another replica: HTTP %d %+v", status, m.Error)
	}
	if err := f.up.WaitCancellations(ctx, "slow_compute", cancels+1); err != nil {
		t.Errorf("a cancel on replica %d never reached the call running on replica %d: %v", (i+1)%len(f.nodes), i, err)
	}
	if status, message := waitTaskEnded(mc, id, time.Now().Add(30*time.Second)); status != "cancelled" {
		t.Errorf("the task cancelled on another replica ended %s %q", status, message)
	}
}

// terminate runs pg_terminate_backend on the backends of the test's
// database that match where, and returns how many it ended.
func (f *pgFaultCluster) terminate(t *testing.T, where string) int {
	t.Helper()
	var n int
	f.query(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND "+where, func(rows pgx.Rows) error {
		return rows.Scan(&n)
	})
	return n
}

// pids returns the backends of the test's database that match where.
func (f *pgFaultCluster) pids(t *testing.T, where string) map[int]bool {
	t.Helper()
	pids := map[int]bool{}
	f.query(t, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND "+where, func(rows pgx.Rows) error {
		var pid int
		err := rows.Scan(&pid)
		pids[pid] = true
		return err
	})
	return pids
}

// query runs sql on a connection of its own (the server may have restarted
// since the last one) and calls row for each row.
func (f *pgFaultCluster) query(t *testing.T, sql string, row func(pgx.Rows) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, f.dbDSN)
	if err != nil {
		t.Fatalf("connecting to the test's database: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
