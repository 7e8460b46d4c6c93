package taskproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// The probe runs once per endpoint while its answer is fresh, for
// 2026-07-28 requests and 2025-11-25 initializes (the reverse bridge),
// never for other 2025-11-25 requests, and an answer that says nothing is
// not kept.
func TestBridgeProbe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		status         int
		body           string
		v2025          bool
		probesForThree int32 // after the initialize's
	}{
		{"2025-only upstream", 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`, true, 1},
		{"2026 upstream", 200, `{"jsonrpc":"2.0","id":"mcp-tasks:probe","result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}}`, false, 1},
		{"upstream down", 502, ``, false, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
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
			g.bridge.ForgetProbe()
			// 2025-11-25 traffic other than initialize never probes.
			for _, req := range []*http.Request{
				post(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, "Mcp-Session-Id", "s-1", "MCP-Protocol-Version", "2025-11-25"),
				post(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`),
				post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`),
			} {
				_ = g.ServeHTTP(httptest.NewRecorder(), req, next)
			}
			if probes.Load() != 0 {
				t.Fatalf("a 2025-11-25 request other than initialize probed the upstream")
			}
			// An initialize probes (the reverse bridge needs to know
			// whether the upstream speaks 2025-11-25), and passes
			// through: the upstream speaks it, or could not be asked.
			_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`), next)
			if probes.Load() != 1 {
				t.Fatalf("an initialize made %d probes, want 1", probes.Load())
			}
			for range 3 {
				if got := g.bridge.UpstreamIsV2025(post(`{}`), next); got != tt.v2025 {
					t.Errorf("upstreamIsLegacy = %v, want %v", got, tt.v2025)
				}
			}
			if probes.Load() != tt.probesForThree {
				t.Errorf("%d probes for an initialize and three requests, want %d", probes.Load(), tt.probesForThree)
			}
		})
	}
}

// A bridge whose upstream session cannot be opened answers with the
// reason and probes again on the next request: the upstream may have
// changed.
func TestBridgeSessionFailureReprobes(t *testing.T) {
	t.Parallel()
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
	g.bridge.ForgetProbe()
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
//
//nolint:paralleltest,tparallel // the test checks, after its cases, what they sent upstream
func TestBridgeRequestOnSession(t *testing.T) {
	t.Parallel()
	up := &v2025Upstream{}
	g := testGateway(t, Config{})
	g.bridge.ForgetProbe()
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
	t.Parallel()
	if e := translate.Error(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "x")); v2026.Status(e.Code) != http.StatusNotFound {
		t.Errorf("-32601 became %d (HTTP %d), want HTTP 404", e.Code, v2026.Status(e.Code))
	}
}
