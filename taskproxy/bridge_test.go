package taskproxy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

func TestClassifyProbe(t *testing.T) {
	msg := func(s string) *jsonrpc.Message {
		m, err := jsonrpc.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name         string
		status       int
		answer       *jsonrpc.Message
		v2025, known bool
	}{
		{"discover result with 2026-07-28", 200, msg(`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}`), false, true},
		{"discover result without it", 200, msg(`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2027-01-01"]}}`), true, true},
		{"session required (TS SDK v1)", 400, msg(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Mcp-Session-Id header is required"}}`), true, true},
		{"method not found in 200", 200, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`), true, true},
		{"header mismatch is a 2026-07-28 server", 400, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}`), false, true},
		{"unsupported version listing 2026-07-28", 400, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}`), false, true},
		{"unsupported version without it", 400, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"],"requested":"2026-07-28"}}}`), true, true},
		{"405 without body", 405, nil, true, true},
		{"404 without body", 404, nil, true, true},
		{"401 says nothing", 401, nil, false, false},
		{"403 says nothing", 403, nil, false, false},
		{"502 says nothing", 502, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v2025, known := classifyProbe(tt.status, tt.answer)
			if v2025 != tt.v2025 || known != tt.known {
				t.Errorf("classifyProbe = v2025 %v known %v, want %v %v", v2025, known, tt.v2025, tt.known)
			}
		})
	}
}

// deleteRecorder is an upstream that records the sessions ended with DELETE.
type deleteRecorder struct {
	mu      sync.Mutex
	deleted []string
}

func (d *deleteRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		d.mu.Lock()
		d.deleted = append(d.deleted, r.Header.Get(upstream.HeaderSessionID))
		d.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func (d *deleteRecorder) ended() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.deleted...)
}

func TestBridgeSessionTable(t *testing.T) {
	up := &deleteRecorder{}
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	opens := map[string]int{}
	var mu sync.Mutex
	open := func(id string) func(context.Context) (*bridgeSession, error) {
		return func(context.Context) (*bridgeSession, error) {
			mu.Lock()
			opens[id]++
			mu.Unlock()
			return &bridgeSession{id: id, version: "2025-11-25", base: base, next: up}, nil
		}
	}
	ctx := context.Background()
	tab := newBridgeSessions(2, time.Hour)
	defer tab.close()

	a1, _ := tab.acquire(ctx, "alice", "alice", open("s-alice"))
	a2, _ := tab.acquire(ctx, "alice", "alice", open("s-alice-2"))
	b, _ := tab.acquire(ctx, "bob", "bob", open("s-bob"))
	if a1 != a2 || a1.id != "s-alice" || b.id != "s-bob" || opens["s-alice-2"] != 0 {
		t.Fatalf("a key's callers must share one session, keys must not: alice %s/%s bob %s", a1.id, a2.id, b.id)
	}
	// At the bound, all in use: nothing is evicted, and the new session
	// is refused rather than exceed the bound.
	if _, err := tab.acquire(ctx, "carol", "carol", open("s-carol")); err == nil || len(tab.byKey) != 2 {
		t.Errorf("a session over the bound with all in use: err %v, table %d; want refused, 2", err, len(tab.byKey))
	}
	// Released, the least recently used goes at the next open, ended upstream.
	a1.release()
	a2.release()
	time.Sleep(time.Millisecond)
	b.release()
	c, _ := tab.acquire(ctx, "carol", "carol", open("s-carol"))
	c.release()
	d, _ := tab.acquire(ctx, "dave", "dave", open("s-dave"))
	d.release()
	waitUntil(t, func() bool { return len(up.ended()) == 2 })
	if got := strings.Join(up.ended(), ","); !strings.Contains(got, "s-alice") || len(tab.byKey) != 2 {
		t.Errorf("evicted %s (table %d), want alice's first", got, len(tab.byKey))
	}
	// A dropped session is opened anew.
	cc, _ := tab.acquire(ctx, "carol", "carol", open("s-carol-2"))
	tab.drop(cc)
	cc.release()
	cc2, _ := tab.acquire(ctx, "carol", "carol", open("s-carol-3"))
	if cc2.id != "s-carol-3" {
		t.Errorf("after drop: %s, want a new session", cc2.id)
	}
	// Closing ends the idle sessions at once, the one in use when released.
	before := len(up.ended())
	tab.close()
	waitUntil(t, func() bool { return len(up.ended()) == before+1 })
	cc2.release()
	waitUntil(t, func() bool { return len(up.ended()) == before+2 })
	if _, err := tab.acquire(ctx, "erin", "erin", open("s-erin")); err == nil {
		t.Errorf("a closed table opened a session")
	}
}

func TestBridgeSessionIdleExpiry(t *testing.T) {
	up := &deleteRecorder{}
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	tab := newBridgeSessions(10, time.Millisecond)
	defer tab.close()
	open := func(id string) func(context.Context) (*bridgeSession, error) {
		return func(context.Context) (*bridgeSession, error) {
			return &bridgeSession{id: id, version: "2025-11-25", base: base, next: up}, nil
		}
	}
	s, _ := tab.acquire(context.Background(), "alice", "alice", open("s-1"))
	s.release()
	time.Sleep(5 * time.Millisecond)
	s2, _ := tab.acquire(context.Background(), "bob", "bob", open("s-2"))
	defer s2.release()
	waitUntil(t, func() bool { return len(up.ended()) == 1 })
	if up.ended()[0] != "s-1" {
		t.Errorf("ended %v, want the idle s-1", up.ended())
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The probe runs once per route while its answer is fresh, only for
// 2026-07-28 requests, and an answer that says nothing is not kept.
func TestBridgeProbe(t *testing.T) {
	tests := []struct {
		name           string
		status         int
		body           string
		v2025          bool
		probesForThree int32
	}{
		{"2025-only upstream", 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`, true, 1},
		{"2026 upstream", 200, `{"jsonrpc":"2.0","id":"mcp-tasks:probe","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}}`, false, 1},
		{"upstream down", 502, ``, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var probes atomic.Int32
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get(upstream.HeaderMethod) == "server/discover" {
					probes.Add(1)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})
			g := testGateway(t, Config{})
			g.bridge.forgetProbe()
			// 2025-11-25 traffic never probes.
			_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`), next)
			if probes.Load() != 0 {
				t.Fatalf("a 2025-11-25 request probed the upstream")
			}
			for range 3 {
				if got := g.bridge.upstreamIsV2025(post(`{}`), next); got != tt.v2025 {
					t.Errorf("upstreamIsLegacy = %v, want %v", got, tt.v2025)
				}
			}
			if probes.Load() != tt.probesForThree {
				t.Errorf("%d probes for three requests, want %d", probes.Load(), tt.probesForThree)
			}
		})
	}
}

// A bridge whose upstream session cannot be opened answers with the
// reason and probes again on the next request: the upstream may have
// changed.
func TestBridgeSessionFailureReprobes(t *testing.T) {
	var probes atomic.Int32
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get(upstream.HeaderMethod) == "server/discover" {
			probes.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`))
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	})
	g := testGateway(t, Config{})
	g.bridge.forgetProbe()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + plainCaps + `}}`
	for i := range 2 {
		w := httptest.NewRecorder()
		_ = g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"), next)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "HTTP 500") {
			t.Errorf("request %d: HTTP %d %s, want the session failure", i, w.Code, w.Body.String())
		}
		if probes.Load() != int32(i+1) {
			t.Errorf("request %d: %d probes, want %d", i, probes.Load(), i+1)
		}
	}
}

// v2025Upstream is a 2025-11-25 server with sessions: it refuses the
// probe, opens session s-1 on initialize, and answers tools/list on the
// session with log messages and progress first, on an event stream.
type v2025Upstream struct {
	mu    sync.Mutex
	seen  []string // method, session and version of each request
	inits int
}

func (u *v2025Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, _ := jsonrpc.Parse(body)
	method := ""
	if m != nil {
		method = m.Method
	}
	u.mu.Lock()
	u.seen = append(u.seen, method+" "+r.Header.Get(upstream.HeaderSessionID)+" "+r.Header.Get(upstream.HeaderProtocolVersion))
	u.mu.Unlock()
	switch {
	case method == "initialize":
		u.mu.Lock()
		u.inits++
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(upstream.HeaderSessionID, "s-1")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"legacy","version":"1"},"instructions":"be nice"}}`))
	case method == "notifications/initialized" && r.Header.Get(upstream.HeaderSessionID) == "s-1":
		w.WriteHeader(http.StatusAccepted)
	case method == "tools/list" && r.Header.Get(upstream.HeaderSessionID) == "s-1":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"debug","data":"chatter"}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":"trouble"}}`,
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`,
			`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tools":[{"name":"t","inputSchema":{},"execution":{"taskSupport":"optional"}}]}}`,
		} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
		}
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Mcp-Session-Id header is required"}}`))
	}
}

// Requests through the bridge run on the session, as 2025-11-25, and come
// back translated; log messages reach the client only at the level the
// request asked for.
func TestBridgeRequestOnSession(t *testing.T) {
	up := &v2025Upstream{}
	g := testGateway(t, Config{})
	g.bridge.forgetProbe()
	send := func(method, meta string) (*jsonrpc.Message, []*jsonrpc.Message) {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}` + meta + `}}}`
		w := httptest.NewRecorder()
		if err := g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method), up); err != nil {
			t.Fatal(err)
		}
		var msgs []*jsonrpc.Message
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			events := sse.NewReader(w.Body)
			for {
				ev, err := events.Next()
				if err != nil {
					break
				}
				if m, err := jsonrpc.Parse([]byte(ev.Data)); err == nil {
					msgs = append(msgs, m)
				}
			}
		} else if m, err := jsonrpc.Parse(w.Body.Bytes()); err == nil {
			msgs = append(msgs, m)
		}
		if len(msgs) == 0 || !msgs[len(msgs)-1].IsResponse() {
			t.Fatalf("%s: HTTP %d %s, want a response", method, w.Code, w.Body)
		}
		return msgs[len(msgs)-1], msgs[:len(msgs)-1]
	}
	tests := []struct {
		name, meta string
		notes      []string
	}{
		{"no log level: no log messages", ``, []string{`"progress":1`}},
		{"warning and above", `,"io.modelcontextprotocol/logLevel":"warning"`, []string{`"trouble"`, `"progress":1`}},
		{"everything", `,"io.modelcontextprotocol/logLevel":"debug"`, []string{`"chatter"`, `"trouble"`, `"progress":1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, notes := send("tools/list", tt.meta)
			if res.Error != nil || !sameJSON(res.Result, []byte(`{"tools":[{"name":"t","inputSchema":{}}],"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"legacy","version":"1"}}}`)) {
				t.Errorf("tools/list = %s %v", res.Result, res.Error)
			}
			if len(notes) != len(tt.notes) {
				t.Fatalf("runtime.Relayed %d notifications, want %d", len(notes), len(tt.notes))
			}
			for i, want := range tt.notes {
				if !strings.Contains(string(notes[i].Params), want) {
					t.Errorf("notification %d = %s, want %s", i, notes[i].Params, want)
				}
			}
		})
	}
	res, _ := send("server/discover", "")
	if !strings.Contains(string(res.Result), `"instructions":"be nice"`) || !strings.Contains(string(res.Result), `"extensions":{"io.modelcontextprotocol/tasks":{}}`) {
		t.Errorf("server/discover = %s", res.Result)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.inits != 1 {
		t.Errorf("%d initializes for one principal, want one session", up.inits)
	}
	for _, s := range up.seen {
		if strings.HasPrefix(s, "tools/list") && s != "tools/list s-1 2025-11-25" {
			t.Errorf("upstream got %q, want tools/list on session s-1 as 2025-11-25", s)
		}
	}
}

func TestBridgedMethodNotFoundIs404(t *testing.T) {
	if e := translate.Error(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "x")); v2026Status(e.Code) != http.StatusNotFound {
		t.Errorf("-32601 became %d (HTTP %d), want HTTP 404", e.Code, v2026Status(e.Code))
	}
}
