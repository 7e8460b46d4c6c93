package taskproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// endpointsUpstream serves several endpoints behind one route: /modern
// speaks 2026-07-28; /legacy is a 2025-11-25 server that answers the
// probe 400; /stateless is a 2025-11-25 server that answers it 405 and
// opens sessions; every other path is 404 for everything. It records the
// headers of each probe.
type endpointsUpstream struct {
	mu     sync.Mutex
	probes []http.Header
}

func (u *endpointsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, _ := jsonrpc.Parse(body)
	method := ""
	if m != nil {
		method = m.Method
	}
	if method == "server/discover" {
		u.mu.Lock()
		u.probes = append(u.probes, r.Header.Clone())
		u.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/modern" && method == "server/discover":
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{},"ttlMs":0,"cacheScope":"public"}}`))
	case r.URL.Path == "/legacy" && method == "server/discover":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`))
	case r.URL.Path == "/stateless" && method == "server/discover":
		w.WriteHeader(http.StatusMethodNotAllowed)
	case r.URL.Path == "/stateless" && method == "initialize":
		w.Header().Set(upstream.HeaderSessionID, "s-1")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}`))
	case r.URL.Path == "/stateless" && method == "tools/list":
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tools":[]}}`))
	case r.URL.Path == "/stateless":
		w.WriteHeader(http.StatusAccepted)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (u *endpointsUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.probes)
}

// The probe's verdict is kept per endpoint (host and path), in a bounded
// map; a 404 or 405 is not kept until an upstream session opens there; and
// the probe carries none of the caller's headers but Authorization.
func TestBridgeProbeEndpoints(t *testing.T) {
	t.Parallel()
	at := func(path string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{}`))
		r.Header.Set("Authorization", "Bearer tok")
		r.Header.Set("Cookie", "sid=secret")
		r.Header.Set("X-Steer", "legacy-please")
		r.Header.Set(upstream.HeaderSessionID, "caller-session")
		return r
	}
	up := &endpointsUpstream{}
	g := testGateway(t, Config{})
	g.bridge.ForgetProbe()
	t.Cleanup(g.bridge.Close)

	tests := []struct {
		path        string
		v2025       bool
		totalProbes int // after this request
	}{
		{"/legacy", true, 1},
		{"/modern", false, 2},
		{"/legacy", true, 2},
		{"/modern", false, 2},
		// A path the upstream does not serve: bridged (its initialize
		// fails there), never kept, and not the route's verdict.
		{"/mcpX", true, 3},
		{"/mcpX", true, 4},
		{"/modern", false, 4},
	}
	for i, tt := range tests {
		if got := g.bridge.UpstreamIsV2025(at(tt.path), up); got != tt.v2025 {
			t.Errorf("request %d to %s: legacy %v, want %v", i, tt.path, got, tt.v2025)
		}
		if n := up.count(); n != tt.totalProbes {
			t.Errorf("request %d to %s: %d probes in all, want %d", i, tt.path, n, tt.totalProbes)
		}
	}

	t.Run("the probe carries no caller headers but Authorization", func(t *testing.T) {
		t.Parallel()
		up.mu.Lock()
		h := up.probes[0]
		up.mu.Unlock()
		if h.Get("Authorization") != "Bearer tok" {
			t.Errorf("probe Authorization %q, want the caller's", h.Get("Authorization"))
		}
		for _, k := range []string{"Cookie", "X-Steer", upstream.HeaderSessionID} {
			if h.Get(k) != "" {
				t.Errorf("probe carries the caller's %s: %q", k, h.Get(k))
			}
		}
		if h.Get(upstream.HeaderMethod) != "server/discover" || h.Get(upstream.HeaderProtocolVersion) != "2026-07-28" {
			t.Errorf("probe headers %v", h)
		}
	})

	t.Run("a 405 is kept once a session opened there", func(t *testing.T) {
		t.Parallel()
		before := up.count()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + plainCaps + `}}`
		for i := range 3 {
			r := httptest.NewRequest(http.MethodPost, "/stateless", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("MCP-Protocol-Version", "2026-07-28")
			r.Header.Set("Mcp-Method", "tools/list")
			w := httptest.NewRecorder()
			if err := g.ServeHTTP(w, r, up); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(w.Body.String(), `"resultType":"complete"`) {
				t.Errorf("request %d: HTTP %d %s, want the bridged tools/list", i, w.Code, w.Body)
			}
		}
		if n := up.count() - before; n != 1 {
			t.Errorf("%d probes for three requests, want 1", n)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		for i := range 3 * wire.MaxProbeVerdicts {
			r := at("/legacy")
			r.Host = fmt.Sprintf("h%d.example", i)
			g.bridge.UpstreamIsV2025(r, up)
		}
		n := g.bridge.Verdicts()
		if n > wire.MaxProbeVerdicts {
			t.Errorf("%d verdicts kept, want at most %d", n, wire.MaxProbeVerdicts)
		}
	})
}
