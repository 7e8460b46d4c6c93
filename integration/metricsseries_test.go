package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// metricsDirectives: slow_compute stops at a run_timeout of a second;
// slow_echo runs as long as it is asked to.
const metricsDirectives = hmacAuth + `
tool slow_compute optional run_timeout 1s
tool slow_echo optional
tool failing_job required
task_after 200ms
`

// sampleValue returns the value of the sample of name with exactly the
// labels given (in the exposition's order), or -1 when there is none.
func sampleValue(exposition, name, labels string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+"{"+labels+"}") + ` (\S+)$`)
	m := re.FindStringSubmatch(exposition)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return v
}

// The series of the store's latency, failures by reason, open streams and
// takeovers, scraped from the real Caddy's /metrics after the events that
// move them: store calls, a task stopped by its run_timeout, a tool error,
// a listen stream and a tasks/result held open, and tasks taken over after
// a crash of the process that ran them.
func TestMetricsSeriesFromEvents(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	store := filepath.Join(t.TempDir(), "store")
	opts := gatewayOptions{Upstream: addr, StorageDir: store, GlobalOptions: "metrics", Directives: metricsDirectives}
	gw := startGateway(t, opts)
	token := hmacToken(t, "alice", "t1")
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+token)
	c.initialize("")

	// Before any event: the counters of known label sets are there at 0.
	exp := gw.metrics()
	for _, s := range []struct{ name, labels string }{
		{"caddy_mcp_tasks_failed_total", `era="2025-11-25",reason="run_timeout"`},
		{"caddy_mcp_tasks_failed_total", `era="2026-07-28",reason="interrupted"`},
		{"caddy_mcp_tasks_takeovers_total", `cause="replica"`},
		{"caddy_mcp_tasks_takeovers_total", `cause="restart"`},
		{"caddy_mcp_tasks_streams_open", `kind="listen"`},
		{"caddy_mcp_tasks_streams_open", `kind="result"`},
	} {
		if v := sampleValue(exp, s.name, s.labels); v != 0 {
			t.Errorf("%s{%s} = %v before any event, want 0\n%s", s.name, s.labels, v, grepLines(exp, s.name))
		}
	}

	timedOut := c.createTask("slow_compute", map[string]any{"seconds": 3600}, 3600000)
	toolError := c.createTask("failing_job", map[string]any{}, 3600000)
	for _, id := range []string{timedOut.TaskID, toolError.TaskID} {
		waitFor(t, 30*time.Second, "the task to fail", func() bool { return c.getTask(id).Status == "failed" })
	}
	waitFor(t, 30*time.Second, "the failures by reason", func() bool {
		exp = gw.metrics()
		return sampleValue(exp, "caddy_mcp_tasks_failed_total", `era="2025-11-25",reason="run_timeout"`) == 1 &&
			sampleValue(exp, "caddy_mcp_tasks_failed_total", `era="2025-11-25",reason="tool_error"`) == 1
	})
	if v := sampleValue(exp, "caddy_mcp_tasks_failed_total", `era="2025-11-25",reason="upstream_error"`); v != 0 {
		t.Errorf("failed_total{reason=upstream_error} = %v, want 0:\n%s", v, grepLines(exp, "caddy_mcp_tasks_failed_total"))
	}
	// Every task created was stored, read and updated through the timed
	// store. A scrape is not a snapshot (Prometheus gathers its collectors
	// one after another), so the histogram is read from a scrape that
	// began after the counters above were seen.
	exp = gw.metrics()
	for _, op := range []string{"create", "get", "update"} {
		if v := sampleValue(exp, "caddy_mcp_tasks_store_duration_seconds_count", fmt.Sprintf(`backend="badger",operation=%q`, op)); v < 1 {
			t.Errorf("store_duration_seconds_count{operation=%q} = %v, want at least 1:\n%s", op, v, grepLines(exp, "caddy_mcp_tasks_store_duration_seconds_count"))
		}
	}

	// Streams held open: a listen on a running 2026-07-28 task, and a
	// 2025-11-25 tasks/result waiting for a running task's outcome.
	hour := map[string]any{"seconds": 3600}
	c26 := newV2026Client(t, gw.URL, true)
	c26.header.Set("Authorization", "Bearer "+token)
	res := c26.ok("tools/call", map[string]any{"name": "slow_echo", "arguments": hour})
	if str(res["resultType"]) != "task" {
		t.Fatalf("slow_echo answered %v, want a task", res)
	}
	listen := watch(t, gw.URL, token, []string{str(res["taskId"])})
	if listen.err != nil {
		t.Fatalf("listen refused: %v", listen.err)
	}
	running := c.createTask("slow_echo", hour, 3600000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body, _ := jsonrpc.RequestBytes(c.id(), "tasks/result", map[string]string{"taskId": running.TaskID})
	type answer struct {
		resp *http.Response
		err  error
	}
	result := make(chan answer, 1)
	req := c.newRequest(ctx, body)
	go func() {
		resp, err := c.httpClient().Do(req) //nolint:bodyclose // closed where result is received, below
		result <- answer{resp, err}
	}()
	waitFor(t, 30*time.Second, "both streams counted open", func() bool {
		exp = gw.metrics()
		return sampleValue(exp, "caddy_mcp_tasks_streams_open", `kind="listen"`) == 1 &&
			sampleValue(exp, "caddy_mcp_tasks_streams_open", `kind="result"`) == 1
	})
	listen.close()
	waitFor(t, 30*time.Second, "the closed listen stream no longer counted", func() bool {
		return sampleValue(gw.metrics(), "caddy_mcp_tasks_streams_open", `kind="listen"`) == 0
	})
	cancel()
	if a := <-result; a.err == nil {
		_ = a.resp.Body.Close()
	}

	// A crash: the next process takes over both slow_echo tasks and fails
	// them, their outcome unknown.
	killGateway(t, gw)
	gw2 := startGateway(t, opts)
	waitFor(t, 30*time.Second, "the takeovers after the restart", func() bool {
		exp = gw2.metrics()
		return sampleValue(exp, "caddy_mcp_tasks_takeovers_total", `cause="restart"`) == 2 &&
			sampleValue(exp, "caddy_mcp_tasks_failed_total", `era="2025-11-25",reason="interrupted"`) == 1 &&
			sampleValue(exp, "caddy_mcp_tasks_failed_total", `era="2026-07-28",reason="interrupted"`) == 1
	})
	if v := sampleValue(exp, "caddy_mcp_tasks_takeovers_total", `cause="replica"`); v != 0 {
		t.Errorf("takeovers_total{cause=replica} = %v after a restart, want 0", v)
	}
}

// On PostgreSQL, a replica that dies with a task running leaves it to the
// other once its lease runs out: the survivor's takeovers_total counts it
// under cause="replica", its failure (the outcome is unknown) counts as
// interrupted, and the store's calls are timed under backend="postgres".
func TestMetricsTakeoverReplica(t *testing.T) {
	t.Parallel()
	up, upAddr := testUpstream(t)
	dsn, _ := testDatabase(t)
	directives := v2025Tools + "lease 2s\ntask_after 200ms"
	a := startPostgresGateway(t, upAddr, dsn, directives)
	b := startPostgresGateway(t, upAddr, dsn, directives)
	a.healthy("replica a's store to open")
	b.healthy("replica b's store to open")
	c := newRPCClient(t, a.URL)
	c.initialize("")
	running := c.createTask("slow_compute", map[string]any{"seconds": 3600}, 3600000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}
	if v := sampleValue(b.metrics(), "caddy_mcp_tasks_takeovers_total", `cause="replica"`); v != 0 {
		t.Fatalf("takeovers_total{cause=replica} = %v before any replica died, want 0", v)
	}
	killGateway(t, a.gateway)
	var exp string
	waitFor(t, 60*time.Second, "replica b to take the task over", func() bool {
		exp = b.metrics()
		return sampleValue(exp, "caddy_mcp_tasks_takeovers_total", `cause="replica"`) == 1 &&
			sampleValue(exp, "caddy_mcp_tasks_failed_total", `era="2025-11-25",reason="interrupted"`) == 1
	})
	// A scrape is not a snapshot: the histogram may have been gathered
	// before the takeover that the counters above saw.
	exp = b.metrics()
	for _, op := range []string{"acquire", "list", "update"} {
		if v := sampleValue(exp, "caddy_mcp_tasks_store_duration_seconds_count", fmt.Sprintf(`backend="postgres",operation=%q`, op)); v < 1 {
			t.Errorf("store_duration_seconds_count{backend=postgres,operation=%q} = %v, want at least 1", op, v)
		}
	}
	var v adminTaskView
	if code, body := adminDo(t, b.adminAddr, http.MethodGet, "/mcp_tasks/tasks/"+running.TaskID, &v); code != http.StatusOK || v.Status != "failed" {
		t.Errorf("the task after the takeover: %d %s", code, body)
	}
}

// store_up follows the store: 0 while another process holds its
// directory, 1 once the gateway could open it.
func TestMetricsStoreUp(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	dir, release := heldStore(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: dir})
	if v := sampleValue(gw.metrics(), "caddy_mcp_tasks_store_up", `backend="badger"`); v != 0 {
		t.Errorf("store_up{backend=badger} = %v while another process holds the store, want 0", v)
	}
	release()
	waitFor(t, 30*time.Second, "store_up to turn 1", func() bool {
		return sampleValue(gw.metrics(), "caddy_mcp_tasks_store_up", `backend="badger"`) == 1
	})
	if v := sampleValue(gw.metrics(), "caddy_mcp_tasks_store_up", `backend="postgres"`); v != -1 {
		t.Errorf("store_up{backend=postgres} = %v with no PostgreSQL store in use, want no series", v)
	}
}
