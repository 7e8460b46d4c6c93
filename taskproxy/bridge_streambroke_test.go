package taskproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// breakingV2025Upstream is a 2025-11-25 server with sessions whose
// tools/call stream breaks (reverse_proxy aborts the answer, as it does
// when the upstream's connection drops) after a progress event without
// an id, so that it cannot be resumed; it records the
// notifications/cancelled it receives.
type breakingV2025Upstream struct {
	mu        sync.Mutex
	cancelled []string // the params of each notifications/cancelled
	callIDs   []string // the id of each tools/call
}

func (u *breakingV2025Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, _ := jsonrpc.Parse(body)
	if m == nil {
		http.Error(w, "no message", http.StatusBadRequest)
		return
	}
	session := r.Header.Get(upstream.HeaderSessionID)
	switch {
	case m.Method == "initialize":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(upstream.HeaderSessionID, "s-1")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"breaks","version":"1"}}}`))
	case session == "s-1" && m.Method == "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	case session == "s-1" && m.Method == "notifications/cancelled":
		u.mu.Lock()
		u.cancelled = append(u.cancelled, string(m.Params))
		u.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	case session == "s-1" && m.Method == "tools/call":
		u.mu.Lock()
		u.callIDs = append(u.callIDs, string(m.ID))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`+"\n\n")
		panic(http.ErrAbortHandler)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Mcp-Session-Id header is required"}}`))
	}
}

// A plain 2026-07-28 call through the version bridge whose 2025-11-25
// stream breaks before any event id fails, saying the stream broke; and
// since a 2025-11-25 server takes a lost stream for no cancellation, the
// gateway tells it with notifications/cancelled for the call, which it
// would otherwise run on for nobody.
func TestBridgedCallStreamBrokeCancelsUpstreamCall(t *testing.T) {
	t.Parallel()
	up := &breakingV2025Upstream{}
	g := testGateway(t, Config{})
	g.bridge.ForgetProbe()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{},` + plainCaps + `}}`
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "slow"), up); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(w.Body.String(), "event stream broke") {
		t.Errorf("HTTP %d %s, want the call failed as a broken stream", w.Code, w.Body)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if len(up.callIDs) != 1 {
		t.Fatalf("the upstream saw %d tools/call, want 1", len(up.callIDs))
	}
	if len(up.cancelled) != 1 || !strings.Contains(up.cancelled[0], `"requestId":`+up.callIDs[0]) {
		t.Errorf("the upstream got notifications/cancelled %q, want one for request %s", up.cancelled, up.callIDs[0])
	}
}
