package replicatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// fixture is one upstream and the schema the replicas share.
type fixture struct {
	schema string
	up     *upstream.Server
	upURL  *url.URL
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	return newFixtureOf(tb, "")
}

// newFixtureOf is newFixture; with only set the upstream speaks that
// protocol version and none newer, as a server built before 2026-07-28
// does: initialize negotiates at most only, and a request with another
// MCP-Protocol-Version header gets HTTP 400 (the gateway then bridges
// 2026-07-28 clients).
func newFixtureOf(tb testing.TB, only string) *fixture {
	tb.Helper()
	up := upstream.New(upstream.Options{})
	var h http.Handler = up
	if only != "" {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v != only {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Unsupported protocol version: `+v+`"}}`)
				return
			}
			if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
				r.Body = io.NopCloser(bytes.NewReader(negotiateAtMost(r.Body, only)))
				r.ContentLength = -1
			}
			up.ServeHTTP(w, r)
		})
	}
	srv := httptest.NewServer(h)
	tb.Cleanup(func() {
		srv.CloseClientConnections() // a failed test may leave a call waiting for input
		srv.Close()
	})
	u, _ := url.Parse(srv.URL)
	return &fixture{schema: newSchema(tb), up: up, upURL: u}
}

// negotiateAtMost reads an initialize request from body and asks for
// version only when it asked for a newer one.
func negotiateAtMost(body io.Reader, only string) []byte {
	data, _ := io.ReadAll(body)
	var m map[string]any
	if json.Unmarshal(data, &m) != nil || m["method"] != "initialize" {
		return data
	}
	if params, ok := m["params"].(map[string]any); ok {
		if v, _ := params["protocolVersion"].(string); v > only {
			params["protocolVersion"] = only
			data, _ = json.Marshal(m)
		}
	}
	return data
}

// replicaOptions tunes one replica.
type replicaOptions struct {
	noNotify      bool
	eventPoll     time.Duration
	retry         []string
	sweepInterval time.Duration
	resumeWait    time.Duration
	wrap          func(*pgstore.Store) task.Store
}

// replica is one gateway with its own store (own pool, own listener).
type replica struct {
	store *pgstore.Store
	rt    *taskproxy.Runtime
	g     *taskproxy.Gateway
	url   string
}

func (f *fixture) replica(tb testing.TB, o replicaOptions) *replica {
	tb.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: f.schema, MaxConns: 8,
		NoNotify: o.noNotify, EventPoll: o.eventPoll})
	if err != nil {
		tb.Fatal(err)
	}
	var store task.Store = s
	if o.wrap != nil {
		store = o.wrap(s)
	}
	rt := taskproxy.NewRuntime(store)
	retry := map[string]bool{}
	for _, name := range o.retry {
		retry[name] = true
	}
	g, err := taskproxy.New(taskproxy.Config{
		TaskAfter: 50 * time.Millisecond, DefaultTTL: 10 * time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20,
		PollInterval: time.Second, RetryOnRestart: retry, SweepInterval: o.sweepInterval, ResumeWait: o.resumeWait,
		// A deep copy, as Caddy's glue makes: re-runs change their base's URL.
		Detach: func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) },
	}, rt)
	if err != nil {
		tb.Fatal(err)
	}
	if err := g.Start(); err != nil {
		tb.Fatal(err)
	}
	// The recovery pass after the start runs in the background: done
	// before the test makes tasks, or a slow one (a loaded machine) would
	// claim, as orphans "after a restart", tasks another replica releases
	// later in the test.
	waitFor(tb, "the replica's recovery pass", func() bool { return rt.Health(context.Background()).Recovered })
	proxy := httputil.NewSingleHostReverseProxy(f.upURL)
	proxy.FlushInterval = -1
	proxy.ErrorLog = log.New(io.Discard, "", 0) // cancelled calls are the point of some tests
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = taskproxy.WithCaller(r, task.Caller{Owner: "alice", Principal: "alice"})
		_ = g.ServeHTTP(w, r, proxy)
	}))
	r := &replica{store: s, rt: rt, g: g, url: srv.URL + "/mcp"}
	tb.Cleanup(func() {
		srv.Close()
		r.stop()
	})
	return r
}

// stop closes the replica's runtime at once, leaving its running tasks as
// they are in the store, their leases released: a replica that stops.
// Tests of a replica that dies expire its leases by hand besides.
func (r *replica) stop() {
	r.g.Close()
	_ = r.rt.Close(0)
}

var ids atomic.Int64

// post sends one JSON-RPC message and returns the response to it (read
// from a JSON answer or from the SSE stream), or nil for a notification.
func post(ctx context.Context, tb testing.TB, url string, headers map[string]string, method string, params any) (*jsonrpc.Message, http.Header) {
	tb.Helper()
	var id json.RawMessage
	if !strings.HasPrefix(method, "notifications/") {
		id, _ = json.Marshal(ids.Add(1))
	}
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		tb.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if id == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, resp.Header
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, _ := io.ReadAll(resp.Body)
		m, err := jsonrpc.Parse(data)
		if err != nil {
			tb.Fatalf("%s: HTTP %d %q: %v", method, resp.StatusCode, data, err)
		}
		return m, resp.Header
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		m, err := jsonrpc.Parse([]byte(data))
		if err == nil && m.IsResponse() && string(m.ID) == string(id) {
			return m, resp.Header
		}
	}
	tb.Fatalf("%s: the stream ended without a response: %v", method, sc.Err())
	return nil, nil
}

func ok(tb testing.TB, m *jsonrpc.Message, what string) map[string]json.RawMessage {
	tb.Helper()
	if m.Error != nil {
		tb.Fatalf("%s: error %d %s", what, m.Error.Code, m.Error.Message)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(m.Result, &out); err != nil {
		tb.Fatalf("%s: %s: %v", what, m.Result, err)
	}
	return out
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// legacySession opens a 2025-11-25 session through url and returns the
// headers its requests carry.
func legacySession(tb testing.TB, url string) map[string]string {
	tb.Helper()
	ctx := context.Background()
	m, h := post(ctx, tb, url, nil, "initialize", map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{"elicitation": map[string]any{}}, "clientInfo": map[string]any{"name": "replicatest", "version": "1"},
	})
	ok(tb, m, "initialize")
	headers := map[string]string{"Mcp-Session-Id": h.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	if headers["Mcp-Session-Id"] == "" {
		tb.Fatal("initialize gave no session")
	}
	post(ctx, tb, url, headers, "notifications/initialized", map[string]any{})
	return headers
}

// legacyTask starts a 2025-11-25 task of tool through url.
func legacyTask(tb testing.TB, url string, session map[string]string, tool string, args map[string]any) string {
	tb.Helper()
	m, _ := post(context.Background(), tb, url, session, "tools/call", map[string]any{
		"name": tool, "arguments": args, "task": map[string]any{"ttl": 600000},
	})
	res := ok(tb, m, "tools/call "+tool)
	var tk struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(res["task"], &tk)
	if tk.TaskID == "" {
		tb.Fatalf("tools/call %s: no task in %s", tool, m.Result)
	}
	return tk.TaskID
}

// v2026Request sends a 2026-07-28 request declaring the tasks extension.
func v2026Request(ctx context.Context, tb testing.TB, url, method string, params map[string]any) *jsonrpc.Message {
	tb.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28",
		"io.modelcontextprotocol/clientInfo":      map[string]any{"name": "replicatest", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"elicitation": map[string]any{},
			"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	headers := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name, ok := params["name"].(string); ok {
		headers["Mcp-Name"] = name
	}
	if id, ok := params["taskId"].(string); ok {
		headers["Mcp-Name"] = id
	}
	m, _ := post(ctx, tb, url, headers, method, params)
	return m
}

// modernTask starts a 2026-07-28 call through url that becomes a task.
func modernTask(tb testing.TB, url, tool string, args map[string]any) string {
	tb.Helper()
	res := ok(tb, v2026Request(context.Background(), tb, url, "tools/call", map[string]any{"name": tool, "arguments": args}), "tools/call "+tool)
	id := str(res["taskId"])
	if id == "" {
		tb.Fatalf("tools/call %s did not become a task: %v", tool, res)
	}
	return id
}

// waitFor polls cond until it holds or the generous deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stored reads the task from a replica's store.
func (r *replica) stored(tb testing.TB, id string) *task.Task {
	tb.Helper()
	t, err := r.store.Get(context.Background(), "alice", id)
	if err != nil {
		tb.Fatalf("reading task %s: %v", id, err)
	}
	return t
}

// longLeases grants every lease taken or renewed for an hour, far beyond
// any test's deadline, so that only a release (a zero ttl) lets another
// replica take a task over.
func longLeases(s *pgstore.Store) task.Store { return hourLeases{s} }

type hourLeases struct{ *pgstore.Store }

func (s hourLeases) Acquire(ctx context.Context, owner, id, holder string, now time.Time, ttl time.Duration) (*task.Task, error) {
	if ttl > 0 {
		ttl = time.Hour
	}
	return s.Store.Acquire(ctx, owner, id, holder, now, ttl)
}
