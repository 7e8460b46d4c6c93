package taskproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// v2026OnlyUpstream is a 2026-07-28 server that does not speak
// 2025-11-25: it answers server/discover listing only 2026-07-28, refuses
// any request without the 2026-07-28 header with -32022, and echoes what it
// saw of the others.
type v2026OnlyUpstream struct {
	mu   sync.Mutex
	seen []*http.Request
	body []string
}

func (u *v2026OnlyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.seen = append(u.seen, r)
	u.body = append(u.body, string(data))
	u.mu.Unlock()
	m, _ := jsonrpc.Parse(data)
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get(upstream.HeaderProtocolVersion) != "2026-07-28" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(jsonrpc.ErrorBytes(m.ID, &jsonrpc.Error{Code: -32022, Message: "Unsupported protocol version",
			Data: json.RawMessage(`{"supported":["2026-07-28"],"requested":"2025-11-25"}`)}))
		return
	}
	switch m.Method {
	case "server/discover":
		_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"only2026","version":"1"}}}`)))
	default:
		_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"resultType":"complete","tools":[],"ttlMs":5,"cacheScope":"public"}`)))
	}
}

func (u *v2026OnlyUpstream) requests() ([]*http.Request, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]*http.Request(nil), u.seen...), append([]string(nil), u.body...)
}

// A 2025-11-25 initialize in front of a 2026-07-28-only upstream is
// answered by the gateway, with a session of its own bound to the caller;
// the session's requests go upstream in 2026-07-28 form, without the
// session. A request other than initialize never probes: before a verdict
// is kept, it passes through.
func TestReverseBridgeDecides(t *testing.T) {
	t.Parallel()
	up := &v2026OnlyUpstream{}
	g := testGateway(t, Config{})
	alice := task.Caller{Owner: "alice", Principal: "alice"}

	w := httptest.NewRecorder()
	_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "MCP-Protocol-Version", "2025-11-25"), alice), up)
	if seen, _ := up.requests(); len(seen) != 1 || seen[0].Header.Get(upstream.HeaderMethod) != "" {
		t.Fatalf("a 2025-11-25 request before any verdict: the upstream saw %d requests, want it alone, passed through", len(seen))
	}

	w = httptest.NewRecorder()
	_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"c","version":"1"}}}`), alice), up)
	sid := w.Header().Get(upstream.HeaderSessionID)
	if w.Code != http.StatusOK || !strings.HasPrefix(sid, "mcp-tasks-v2026.") || !strings.Contains(w.Body.String(), `"protocolVersion":"2025-11-25"`) || !strings.Contains(w.Body.String(), `"only2026"`) {
		t.Fatalf("initialize: HTTP %d session %q %s", w.Code, sid, w.Body.String())
	}

	w = httptest.NewRecorder()
	_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"progressToken":5}}}`, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"), alice), up)
	if w.Code != http.StatusOK || w.Body.String() != `{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}` {
		t.Errorf("tools/list: HTTP %d %s", w.Code, w.Body.String())
	}
	seen, bodies := up.requests()
	last, lastBody := seen[len(seen)-1], bodies[len(bodies)-1]
	if last.Header.Get(upstream.HeaderSessionID) != "" || last.Header.Get(upstream.HeaderMethod) != "tools/list" {
		t.Errorf("the upstream's tools/list: session %q method %q", last.Header.Get(upstream.HeaderSessionID), last.Header.Get(upstream.HeaderMethod))
	}
	for _, want := range []string{`"progressToken":5`, `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`, `"io.modelcontextprotocol/clientCapabilities":{"sampling":{}}`, `"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}`} {
		if !strings.Contains(lastBody, want) {
			t.Errorf("the upstream's tools/list %s lacks %s", lastBody, want)
		}
	}

	// Bob naming alice's session: 404, and nothing goes upstream.
	n := len(seen)
	w = httptest.NewRecorder()
	_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`, "Mcp-Session-Id", sid), task.Caller{Owner: "bob", Principal: "bob"}), up)
	if seen, _ := up.requests(); w.Code != http.StatusNotFound || len(seen) != n {
		t.Errorf("bob's ping on alice's session: HTTP %d, %d upstream requests, want 404 and none", w.Code, len(seen)-n)
	}
}

// A 2025-11-25 client cannot have the upstream run tasks past the
// gateway: the tasks extension it declares (in its initialize, or in a
// request's own _meta, in any spelling or copy) never reaches the upstream,
// whose tasks only the gateway asks for under its policy; and the
// 2026-07-28 methods that reach the upstream's tasks and streams are not
// 2025-11-25's: -32601, nothing sent upstream.
func TestReverseBridgeKeepsTasksTheGateways(t *testing.T) {
	t.Parallel()
	up := &v2026OnlyUpstream{}
	g := testGateway(t, Config{})
	alice := task.Caller{Owner: "alice", Principal: "alice"}
	w := httptest.NewRecorder()
	_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x/other":{}}},"clientInfo":{"name":"c","version":"1"}}}`), alice), up)
	sid := w.Header().Get(upstream.HeaderSessionID)
	if sid == "" {
		t.Fatalf("no session: HTTP %d %s", w.Code, w.Body.String())
	}
	send := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		_ = g.ServeHTTP(w, WithCaller(post(body, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"), alice), up)
		return w
	}

	for _, body := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"progressToken":1}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/client\u0043apabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
	} {
		before, _ := up.requests()
		w := send(body)
		_, bodies := up.requests()
		if w.Code == http.StatusBadRequest && len(bodies) == len(before) {
			continue // refused as ambiguous before anything went upstream
		}
		if w.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", body, w.Code, w.Body.String())
		}
		sent := bodies[len(bodies)-1]
		if strings.Contains(sent, "io.modelcontextprotocol/tasks") || strings.Count(sent, "clientCapabilities") != 1 {
			t.Errorf("for %s the upstream got %s: the client's tasks extension, or a second clientCapabilities", body, sent)
		}
		if !strings.Contains(sent, `"elicitation":{}`) || !strings.Contains(sent, `"x/other":{}`) {
			t.Errorf("the upstream got %s: the client's other capabilities are lost", sent)
		}
	}

	for _, method := range []string{"tasks/update", "subscriptions/listen", "server/discover"} {
		before, _ := up.requests()
		w := send(`{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":{"taskId":"t"}}`)
		after, _ := up.requests()
		m, err := jsonrpc.Parse(w.Body.Bytes())
		if err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeMethodNotFound || len(after) != len(before) {
			t.Errorf("%s: HTTP %d %s, %d upstream requests; want -32601 and none", method, w.Code, w.Body.String(), len(after)-len(before))
		}
	}
}

// A tool configured forbidden as a task is not called again declaring the
// tasks extension when the upstream refuses it for want of it: as on
// 2026-07-28, forbidden tools go without the extension, and the upstream's
// refusal reaches the client. A tool not forbidden is called again.
func TestReverseBridgeForbiddenToolStaysPlain(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := map[string]int{}
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.Parse(data)
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "server/discover":
			_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public"}`)))
		case "tools/call":
			var p struct{ Name string }
			_ = json.Unmarshal(m.Params, &p)
			mu.Lock()
			calls[p.Name]++
			mu.Unlock()
			_, _ = w.Write(jsonrpc.ErrorBytes(m.ID, &jsonrpc.Error{Code: jsonrpc.CodeMissingRequiredClientCapability, Message: "task required",
				Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`)}))
		}
	})
	g := testGateway(t, Config{Tools: map[string]task.Support{"export": task.SupportForbidden}})
	alice := task.Caller{Owner: "alice", Principal: "alice"}
	w := httptest.NewRecorder()
	_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`), alice), up)
	sid := w.Header().Get(upstream.HeaderSessionID)
	for _, tt := range []struct {
		tool  string
		calls int
	}{{"export", 1}, {"report", 2}} {
		w = httptest.NewRecorder()
		_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+tt.tool+`","arguments":{}}}`, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"), alice), up)
		mu.Lock()
		n := calls[tt.tool]
		mu.Unlock()
		if n != tt.calls {
			t.Errorf("%s: the upstream got %d calls, want %d", tt.tool, n, tt.calls)
		}
		if tt.tool == "export" && !strings.Contains(w.Body.String(), `"code":-32021`) {
			t.Errorf("%s: answered %s, want the upstream's -32021", tt.tool, w.Body.String())
		}
	}
}

// An upstream whose probe answer is not kept (it refuses the probe's
// credentials, answers 404, 405 or 5xx) is probed by the first
// initialize only: once a passed-on initialize opened a 2025-11-25
// session there, the next ones pass on without a probe. Such an answer
// changes nothing for 2026-07-28 clients (the shared verdict stays
// unknown).
func TestReverseBridgeProbesOnceForV2025Upstreams(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusInternalServerError} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			discovers, initializes := 0, 0
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				data, _ := io.ReadAll(r.Body)
				m, _ := jsonrpc.Parse(data)
				mu.Lock()
				defer mu.Unlock()
				if m.Method == "server/discover" {
					discovers++
					w.WriteHeader(status)
					return
				}
				initializes++
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set(upstream.HeaderSessionID, "up-session")
				_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}`)))
			})
			g := testGateway(t, Config{})
			for range 5 {
				w := httptest.NewRecorder()
				_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`), task.Caller{Owner: "alice", Principal: "alice"}), up)
				if w.Code != http.StatusOK || w.Header().Get(upstream.HeaderSessionID) != "up-session" {
					t.Fatalf("initialize: HTTP %d session %q, want the upstream's", w.Code, w.Header().Get(upstream.HeaderSessionID))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if discovers != 1 || initializes != 5 {
				t.Errorf("5 initializes made %d probes and reached the upstream %d times, want 1 and 5", discovers, initializes)
			}
		})
	}
}
