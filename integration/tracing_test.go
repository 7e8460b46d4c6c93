package integration

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the protobuf
// export requests Caddy's exporter posts to /v1/traces and keeps the spans.
type otlpReceiver struct {
	t     testing.TB
	mu    sync.Mutex
	spans []*tracepb.Span
	URL   string
}

func startOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{t: t}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			t.Errorf("OTLP receiver: undecodable export request (%s): %v", r.Header.Get("Content-Type"), err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				rcv.spans = append(rcv.spans, ss.Spans...)
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	rcv.URL = srv.URL
	return rcv
}

// find returns the spans received so far named name whose string
// attribute key is value (any, when key is empty).
func (rcv *otlpReceiver) find(name, key, value string) []*tracepb.Span {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range rcv.spans {
		if s.Name == name && (key == "" || spanAttr(s, key) == value) {
			out = append(out, s)
		}
	}
	return out
}

// await waits until a span named name with attribute key=value arrived.
func (rcv *otlpReceiver) await(name, key, value string) *tracepb.Span {
	rcv.t.Helper()
	var found []*tracepb.Span
	waitFor(rcv.t, 30*time.Second, fmt.Sprintf("span %s with %s=%s", name, key, value), func() bool {
		found = rcv.find(name, key, value)
		return len(found) > 0
	})
	return found[len(found)-1]
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// tracingUpstream is the go-sdk fixture upstream behind a recorder of the
// traceparent of every tools/call it receives.
type tracingUpstream struct {
	next  http.Handler
	mu    sync.Mutex
	calls []string // traceparent headers of the tools/call requests, in order
}

func (u *tracingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if msg, err := jsonrpc.Parse(body); err == nil && msg.Method == "tools/call" {
		u.mu.Lock()
		u.calls = append(u.calls, r.Header.Get("Traceparent"))
		u.mu.Unlock()
	}
	u.next.ServeHTTP(w, r)
}

func (u *tracingUpstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}

func startTracingUpstream(t testing.TB) (*tracingUpstream, string) {
	t.Helper()
	fixture, _ := testUpstream(t)
	u := &tracingUpstream{next: fixture}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	return u, strings.TrimPrefix(srv.URL, "http://")
}

// tracingEnv points Caddy's OTLP exporter at rcv over HTTP/protobuf, with
// the batch processor exporting every 100 ms.
func tracingEnv(rcv *otlpReceiver) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL,
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
}

// The client's trace context, as a traced client sends it.
const (
	clientTraceID = "5b8efff798038103d269b633813fc60c"
	clientSpan1   = "eee19b7ec3c1b174"
	clientSpan2   = "eee19b7ec3c1b175"
)

func traceIDOf(s *tracepb.Span) string { return hex.EncodeToString(s.TraceId) }
func spanIDOf(s *tracepb.Span) string  { return hex.EncodeToString(s.SpanId) }

// auditLine returns the first audit line of msg for task id, decoded.
func auditLine(gw *gateway, msg, id string) map[string]any {
	for s := range strings.SplitSeq(gw.logs(), "\n") {
		if !strings.Contains(s, `"logger":"http.handlers.mcp_tasks.audit"`) {
			continue
		}
		var l map[string]any
		if json.Unmarshal([]byte(s), &l) == nil && l["msg"] == msg && l["task"] == id {
			return l
		}
	}
	return nil
}

// With Caddy's tracing directive before mcp_tasks, exporting OTLP over
// HTTP to a receiver of the test: the client's create, the task's run, the
// upstream's background call (its traceparent), the completion and the
// later tasks/get and tasks/result are one trace, the client's; the
// audit line and the admin API name that trace. Without the directive,
// the gateway adds nothing: the background call carries the client's
// traceparent as it was sent, and the audit line no trace id.
func TestTracingOneTrace(t *testing.T) {
	t.Parallel()
	for _, traced := range []bool{true, false} {
		t.Run(fmt.Sprintf("tracing=%v", traced), func(t *testing.T) {
			t.Parallel()
			rcv := startOTLPReceiver(t)
			up, addr := startTracingUpstream(t)
			opts := gatewayOptions{Upstream: addr, Directives: v2025Tools, Env: tracingEnv(rcv)}
			if traced {
				opts.SiteDirectives = "tracing {\n\tspan mcp\n}"
			}
			gw := startGateway(t, opts)
			c := newRPCClient(t, gw.URL)
			c.initialize("")
			createParent := "00-" + clientTraceID + "-" + clientSpan1 + "-01"
			c.header.Set("Traceparent", createParent)
			tk := c.createTask("slow_compute", map[string]any{"seconds": 0.3, "label": "traced"}, 60000)
			c.header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpan2+"-01")
			waitFor(t, 30*time.Second, "the task to complete", func() bool { return c.getTask(tk.TaskID).Status == "completed" })
			if res := c.call("tasks/result", map[string]string{"taskId": tk.TaskID}); res.Error != nil {
				t.Fatalf("tasks/result: %v", res.Error)
			}
			calls := up.received()
			if len(calls) != 1 {
				t.Fatalf("the upstream got %d tools/call requests (traceparents %q), want 1", len(calls), calls)
			}
			created := auditLine(gw, "task created", tk.TaskID)
			if created == nil {
				t.Fatalf("no audit line of the create")
			}
			if !traced {
				if calls[0] != createParent {
					t.Errorf("untraced: the upstream's background call carried traceparent %q, want the client's %q unchanged", calls[0], createParent)
				}
				if _, ok := created["trace_id"]; ok {
					t.Errorf("untraced: the audit line has a trace_id: %v", created)
				}
				if got := rcv.find("mcp.task.run", "", ""); len(got) != 0 {
					t.Errorf("untraced: %d mcp.task.run spans exported", len(got))
				}
				return
			}

			run := rcv.await("mcp.task.run", "mcp.task.id", tk.TaskID)
			if traceIDOf(run) != clientTraceID {
				t.Errorf("mcp.task.run is in trace %s, want the client's %s", traceIDOf(run), clientTraceID)
			}
			if want := "00-" + clientTraceID + "-" + spanIDOf(run) + "-01"; calls[0] != want {
				t.Errorf("the upstream's background call carried traceparent %q, want the run span's %q", calls[0], want)
			}
			create := rcv.await("mcp.task.create", "mcp.task.id", tk.TaskID)
			complete := rcv.await("mcp.task.complete", "mcp.task.id", tk.TaskID)
			get := rcv.await("mcp.task.get", "mcp.task.id", tk.TaskID)
			result := rcv.await("mcp.task.result", "mcp.task.id", tk.TaskID)
			for _, s := range []*tracepb.Span{create, complete, get, result} {
				if traceIDOf(s) != clientTraceID {
					t.Errorf("%s is in trace %s, want the client's %s", s.Name, traceIDOf(s), clientTraceID)
				}
			}
			if hex.EncodeToString(complete.ParentSpanId) != spanIDOf(run) || spanAttr(complete, "mcp.task.status") != "completed" {
				t.Errorf("mcp.task.complete: parent %x status %q, want under the run span, completed", complete.ParentSpanId, spanAttr(complete, "mcp.task.status"))
			}
			if created["trace_id"] != clientTraceID {
				t.Errorf("the create's audit line has trace_id %v, want %s", created["trace_id"], clientTraceID)
			}
			var view map[string]any
			if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/"+tk.TaskID, &view); code != http.StatusOK || view["trace_id"] != clientTraceID {
				t.Errorf("the admin API's view of the task: %d %s, want trace_id %s", code, body, clientTraceID)
			}
		})
	}
}

// A task running when the traced gateway is killed runs again after the
// restart (retry_on_restart): its mcp.task.run span is a new trace, linked
// to the create's stored context, and the upstream's second call carries
// that span's traceparent.
func TestTracingRerunLinked(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	up, addr := startTracingUpstream(t)
	store := filepath.Join(t.TempDir(), "store")
	gw := startGateway(t, gatewayOptions{
		Upstream: addr, StorageDir: store, Directives: v2025Tools + "tool slow_echo optional retry_on_restart\nlease 2s",
		SiteDirectives: "tracing {\n\tspan mcp\n}", Env: tracingEnv(rcv),
	})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	c.header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpan1+"-01")
	// Long enough to be killed while running; the re-run span is
	// exported when the re-run ends.
	tk := c.createTask("slow_echo", map[string]any{"seconds": 8, "label": "rerun"}, 600000)
	waitFor(t, 30*time.Second, "the upstream to receive the call", func() bool { return len(up.received()) == 1 })
	first := rcv.await("mcp.task.create", "mcp.task.id", tk.TaskID) // exported before the kill
	if traceIDOf(first) != clientTraceID {
		t.Fatalf("mcp.task.create in trace %s, want %s", traceIDOf(first), clientTraceID)
	}
	killGateway(t, gw)
	gw.proc = startProcessEnv(t, gw.env(), gw.addr, caddyBinary, "run", "--config", gw.config, "--adapter", "caddyfile")

	// The re-run goes through the route once it serves a request.
	c2 := newRPCClient(t, gw.URL)
	c2.initialize("")
	var rerun *tracepb.Span
	waitFor(t, 60*time.Second, "the re-run's mcp.task.run span", func() bool {
		for _, s := range rcv.find("mcp.task.run", "mcp.task.id", tk.TaskID) {
			for _, kv := range s.Attributes {
				if kv.Key == "mcp.task.rerun" && kv.Value.GetBoolValue() {
					rerun = s
				}
			}
		}
		return rerun != nil
	})
	if traceIDOf(rerun) == clientTraceID || len(rerun.ParentSpanId) != 0 {
		t.Errorf("the re-run span is in trace %s with parent %x, want a new trace (a root)", traceIDOf(rerun), rerun.ParentSpanId)
	}
	linked := false
	for _, l := range rerun.Links {
		linked = linked || (hex.EncodeToString(l.TraceId) == clientTraceID && hex.EncodeToString(l.SpanId) != "")
	}
	if !linked {
		t.Errorf("the re-run span's links %v do not name the create's trace %s", rerun.Links, clientTraceID)
	}
	waitFor(t, 30*time.Second, "the upstream to receive the re-run", func() bool { return len(up.received()) == 2 })
	if got, want := up.received()[1], "00-"+traceIDOf(rerun)+"-"+spanIDOf(rerun)+"-01"; got != want {
		t.Errorf("the re-run's upstream call carried traceparent %q, want the re-run span's %q", got, want)
	}
}

// A 2026-07-28 task with an input round, traced: the call reached the
// upstream within the create request (its traceparent is the create
// request's span), the retry with the client's answer carries the run
// span's; the input request and answer, the tasks/update and the
// completion are spans of the client's trace.
func TestTracingV2026Input(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	up, addr := startTracingUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "task_after 500ms", SiteDirectives: "tracing {\n\tspan mcp\n}", Env: tracingEnv(rcv)})
	c := newV2026Client(t, gw.URL, true)
	c.header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpan1+"-01")
	res := c.ok("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "a.txt"}})
	id := str(res["taskId"])
	if str(res["resultType"]) != "task" || id == "" {
		t.Fatalf("the call answered %v, want a task", res)
	}
	task := c.waitStatus(id, "input_required")
	var inputs map[string]json.RawMessage
	_ = json.Unmarshal(task["inputRequests"], &inputs)
	answers := map[string]any{}
	for k := range inputs {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	c.header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpan2+"-01")
	c.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": answers})
	c.waitStatus(id, "completed")

	calls := up.received()
	if len(calls) != 2 {
		t.Fatalf("the upstream got %d tools/call requests (%q), want 2 rounds", len(calls), calls)
	}
	run := rcv.await("mcp.task.run", "mcp.task.id", id)
	create := rcv.await("mcp.task.create", "mcp.task.id", id)
	if traceIDOf(run) != clientTraceID || traceIDOf(create) != clientTraceID {
		t.Fatalf("run in trace %s, create in %s, want the client's %s", traceIDOf(run), traceIDOf(create), clientTraceID)
	}
	if want := "00-" + clientTraceID + "-" + hex.EncodeToString(create.ParentSpanId) + "-01"; calls[0] != want {
		t.Errorf("the first round carried traceparent %q, want the create request's span %q", calls[0], want)
	}
	if want := "00-" + clientTraceID + "-" + spanIDOf(run) + "-01"; calls[1] != want {
		t.Errorf("the retry with the answer carried traceparent %q, want the run span's %q", calls[1], want)
	}
	for _, step := range []string{"requested", "answered"} {
		in := rcv.await("mcp.task.input", "mcp.task.input.event", step)
		if traceIDOf(in) != clientTraceID || spanAttr(in, "mcp.task.id") != id {
			t.Errorf("mcp.task.input %s: trace %s task %s", step, traceIDOf(in), spanAttr(in, "mcp.task.id"))
		}
	}
	for _, name := range []string{"mcp.task.update", "mcp.task.complete", "mcp.task.get"} {
		if s := rcv.await(name, "mcp.task.id", id); traceIDOf(s) != clientTraceID {
			t.Errorf("%s in trace %s, want %s", name, traceIDOf(s), clientTraceID)
		}
	}
}

// A replica killed while it runs a traced task: the replica that takes
// it over runs it again (retry_on_restart) in a new trace whose
// mcp.task.run span links to the create's stored context, read from
// PostgreSQL, and its upstream call carries that span's traceparent.
func TestTracingTakeoverLinked(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	up, upAddr := startTracingUpstream(t)
	dsn, _ := testDatabase(t)
	replica := func() *postgresGateway {
		g := &postgresGateway{gateway: &gateway{t: t, addr: freeAddr(t), adminAddr: freeAddr(t), home: t.TempDir()}, dsn: dsn}
		g.URL = "http://" + g.addr + "/mcp"
		g.config = filepath.Join(g.home, "Caddyfile")
		g.opts = gatewayOptions{Upstream: upAddr, SiteDirectives: "tracing {\n\tspan mcp\n}", Env: tracingEnv(rcv)}
		g.write(replicaDirectives + "lease 2s")
		g.start()
		g.healthy("the replica's store to open")
		return g
	}
	a, b := replica(), replica()
	mc := newV2026Client(t, a.URL, true)
	mc.header.Set("Authorization", "Bearer "+hmacToken(t, "traced", "t1"))
	mc.header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpan1+"-01")
	res := mc.ok("tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"seconds": 8, "label": "taken-over"}})
	id := str(res["taskId"])
	if str(res["resultType"]) != "task" || id == "" {
		t.Fatalf("the call answered %v, want a task", res)
	}
	waitFor(t, 30*time.Second, "replica a to run the task", func() bool { return holds(t, b, id, a) })
	killGateway(t, a.gateway)

	// Replica b's route re-runs the task once it serves a request.
	mb := newV2026Client(t, b.URL, true)
	mb.header.Set("Authorization", mc.header.Get("Authorization"))
	mb.header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpan2+"-01")
	waitFor(t, 60*time.Second, "replica b to take the task over", func() bool {
		mb.get(id)
		return holds(t, b, id, b)
	})
	var rerun *tracepb.Span
	waitFor(t, 60*time.Second, "the takeover's mcp.task.run span", func() bool {
		mb.get(id)
		for _, s := range rcv.find("mcp.task.run", "mcp.task.id", id) {
			for _, kv := range s.Attributes {
				if kv.Key == "mcp.task.rerun" && kv.Value.GetBoolValue() {
					rerun = s
				}
			}
		}
		return rerun != nil
	})
	if traceIDOf(rerun) == clientTraceID || len(rerun.ParentSpanId) != 0 {
		t.Errorf("the takeover's run span is in trace %s with parent %x, want a new trace", traceIDOf(rerun), rerun.ParentSpanId)
	}
	if len(rerun.Links) != 1 || hex.EncodeToString(rerun.Links[0].TraceId) != clientTraceID {
		t.Errorf("the takeover's run span links %v, want one to the create's trace %s", rerun.Links, clientTraceID)
	}
	calls := up.received()
	if got, want := calls[len(calls)-1], "00-"+traceIDOf(rerun)+"-"+spanIDOf(rerun)+"-01"; got != want {
		t.Errorf("the takeover's upstream call carried traceparent %q, want its run span's %q", got, want)
	}
}
