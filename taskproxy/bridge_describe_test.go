package taskproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// elicitUpstream speaks 2026-07-28 only; its tool "ask" needs the
// client's elicitation capability: a tools/call whose _meta declares none
// is refused with -32021, as a 2026-07-28 server refuses a request needing
// a capability the client did not declare. It keeps the log level each
// call asked for.
type elicitUpstream struct {
	mu     sync.Mutex
	levels []string
}

func (u *elicitUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	m, _ := jsonrpc.Parse(data)
	w.Header().Set("Content-Type", "application/json")
	switch m.Method {
	case "server/discover":
		_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"elicit","version":"1"}}}`)))
	case "tools/call":
		var p struct {
			Meta struct {
				Caps     map[string]json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
				LogLevel string                     `json:"io.modelcontextprotocol/logLevel"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		u.mu.Lock()
		u.levels = append(u.levels, p.Meta.LogLevel)
		u.mu.Unlock()
		if _, ok := p.Meta.Caps["elicitation"]; !ok {
			_, _ = w.Write(jsonrpc.ErrorBytes(m.ID, &jsonrpc.Error{Code: -32021, Message: "Missing required client capability",
				Data: json.RawMessage(`{"requiredCapabilities":{"elicitation":{}}}`)}))
			return
		}
		_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"resultType":"complete","content":[{"type":"text","text":"asked"}]}`)))
	default:
		_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"resultType":"complete","tools":[],"ttlMs":0,"cacheScope":"public"}`)))
	}
}

func (u *elicitUpstream) lastLevel() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.levels) == 0 {
		return ""
	}
	return u.levels[len(u.levels)-1]
}

// bridgeSession opens who's reverse-bridge session, its initialize
// declaring caps, and returns a function sending a request on it.
func bridgeSession(t *testing.T, g *Gateway, up http.Handler, who, caps string) func(body string) *httptest.ResponseRecorder {
	t.Helper()
	caller := task.Caller{Owner: who, Principal: who}
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"c","version":"1"}}}`), caller), up); err != nil {
		t.Fatal(err)
	}
	sid := w.Header().Get(upstream.HeaderSessionID)
	if w.Code != http.StatusOK || sid == "" {
		t.Fatalf("%s's initialize: HTTP %d %s", who, w.Code, w.Body.String())
	}
	return func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		if err := g.ServeHTTP(w, WithCaller(post(body, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"), caller), up); err != nil {
			t.Fatal(err)
		}
		return w
	}
}

const askCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{}}}`

// However many sessions others open, a session's client description stays
// with it: alice's elicitation-capable session, opened before another
// principal opened more sessions than any in-memory table of descriptions
// would hold, still declares elicitation (and its log level) upstream, so
// its tool needing elicitation works.
func TestBridgeDescriptionOutlivesOtherSessions(t *testing.T) {
	t.Parallel()
	up := &elicitUpstream{}
	g := testGateway(t, Config{})
	alice := bridgeSession(t, g, up, "alice", `{"elicitation":{}}`)
	if w := alice(`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"debug"}}`); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"result":{}`) {
		t.Fatalf("setLevel: HTTP %d %s", w.Code, w.Body.String())
	}
	const others = 4200 // more than the 4096 descriptions once kept in memory
	var wg sync.WaitGroup
	for worker := range 4 {
		wg.Go(func() {
			for i := worker; i < others; i += 4 {
				w := httptest.NewRecorder()
				mallory := task.Caller{Owner: "mallory", Principal: "mallory"}
				_ = g.ServeHTTP(w, WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}}`), mallory), up)
				if w.Code != http.StatusOK {
					t.Errorf("mallory's initialize %d: HTTP %d %s", i, w.Code, w.Body.String())
					return
				}
			}
		})
	}
	wg.Wait()
	w := alice(askCall)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"text":"asked"`) {
		t.Errorf("alice's call of a tool needing elicitation after %d other sessions: HTTP %d %s", others, w.Code, w.Body.String())
	}
	if got := up.lastLevel(); got != "debug" {
		t.Errorf("the upstream was asked for log level %q, want debug (set on the session)", got)
	}
}

// A session bound by an older build has no description in the store: its
// requests declare no client capabilities, as before; its setLevel is
// kept; and a DELETE ends it with its description.
func TestBridgeSessionWithoutDescription(t *testing.T) {
	t.Parallel()
	up := &elicitUpstream{}
	store := newMemStore(t)
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, NewRuntime(store))
	if err != nil {
		t.Fatal(err)
	}
	g.bridge.Pin(false)
	// A session of this gateway's, so that the bridge has its verdict.
	_ = bridgeSession(t, g, up, "alice", `{"elicitation":{}}`)
	sid := fmt.Sprintf("mcp-tasks-v2026.%s", task.NewTaskID())
	if err := store.BindSession(context.Background(), sid, "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	alice := task.Caller{Owner: "alice", Principal: "alice"}
	send := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		if err := g.ServeHTTP(w, WithCaller(post(body, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"), alice), up); err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := send(askCall); !strings.Contains(w.Body.String(), `-32021`) {
		t.Errorf("a call on a session without a description: HTTP %d %s, want the upstream's -32021", w.Code, w.Body.String())
	}
	if w := send(`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"warning"}}`); w.Code != http.StatusOK {
		t.Fatalf("setLevel: HTTP %d %s", w.Code, w.Body.String())
	}
	_ = send(askCall)
	if got := up.lastLevel(); got != "warning" {
		t.Errorf("after setLevel on a session without a description: log level %q, want warning", got)
	}
	w := httptest.NewRecorder()
	r := WithCaller(post("", "Mcp-Session-Id", sid), alice)
	r.Method = http.MethodDelete
	if err := g.ServeHTTP(w, r, up); err != nil || w.Code != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d, %v", w.Code, err)
	}
	if _, err := store.SessionDescription(context.Background(), sid, "alice"); err == nil {
		t.Errorf("the description of a DELETEd session is still stored")
	}
}
