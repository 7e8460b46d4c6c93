package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func testGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	if cfg.DefaultTTL == 0 {
		cfg.DefaultTTL, cfg.MaxTTL = time.Minute, time.Hour
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 1 << 20
	}
	g, err := New(cfg, NewRuntime(newMemStore(t)))
	if err != nil {
		t.Fatal(err)
	}
	// The test upstreams here stand for 2026-07-28 servers: no probe
	// (the version bridge's probe has its own tests, TestBridgeProbe).
	g.bridge.Pin(false)
	return g
}

func post(body string, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

// upstreamAnswer is a next handler answering with a fixed body and type.
func upstreamAnswer(contentType, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", "1") // wrong on purpose: the rewrite must drop it
		w.WriteHeader(http.StatusOK)
		for _, part := range strings.SplitAfter(body, "\n") { // several writes, as a proxy would
			_, _ = io.WriteString(w, part)
			w.(http.Flusher).Flush()
		}
	})
}

func TestDiscoveryRewrite(t *testing.T) {
	t.Parallel()
	const initResult = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"up","version":"1"}}}`
	// deep is a tool the upstream runs only as a task: required whatever
	// is configured, also before any initialize answer was seen here (the
	// session's went through another process or configuration).
	const toolsResult = `{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}},{"name":"quick","execution":{"taskSupport":"optional"},"inputSchema":{}},{"name":"deep","execution":{"taskSupport":"required"}}]}}`
	tests := []struct {
		name, request, contentType, upstream string
		listTasks                            bool
		wantParts                            []string
		wantSame                             bool
	}{
		{
			name:        "initialize JSON",
			request:     `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
			contentType: "application/json", upstream: initResult,
			wantParts: []string{`"capabilities":{"tools":{"listChanged":true},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}`, `"serverInfo":{"name":"up","version":"1"}`},
		},
		{
			name:        "initialize SSE with list",
			request:     `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`,
			contentType: "text/event-stream", upstream: "id: p1\ndata: \n\nevent: message\nid: e2\ndata: " + initResult + "\n\n",
			listTasks: true,
			wantParts: []string{"id: p1\ndata: \n\n", "event: message\n", `"tasks":{"list":{},"cancel":{}`},
		},
		{
			name:        "older protocol untouched",
			request:     `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
			contentType: "application/json", upstream: strings.Replace(initResult, "2025-11-25", "2025-06-18", 1),
			wantSame: true,
		},
		{
			name:        "tools/list modes",
			request:     `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
			contentType: "application/json", upstream: toolsResult,
			wantParts: []string{`{"name":"slow","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}`, `{"name":"quick","execution":{"taskSupport":"forbidden"},"inputSchema":{}}`,
				`{"name":"deep","execution":{"taskSupport":"required"}}`},
		},
		{
			name:        "other id untouched",
			request:     `{"jsonrpc":"2.0","id":99,"method":"tools/list"}`,
			contentType: "application/json", upstream: toolsResult,
			wantSame: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{ListTasks: tt.listTasks, DefaultTaskSupport: task.SupportOptional,
				Tools: map[string]task.Support{"slow": task.SupportRequired, "quick": task.SupportForbidden}})
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(tt.request, "Accept-Encoding", "gzip"), upstreamAnswer(tt.contentType, tt.upstream)); err != nil {
				t.Fatal(err)
			}
			got := rec.Body.String()
			if cl := rec.Header().Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(got)) {
				t.Errorf("Content-Length %q, body is %d bytes", cl, len(got))
			}
			if tt.wantSame {
				if got != tt.upstream {
					t.Errorf("body changed:\n got %s\nwant %s", got, tt.upstream)
				}
				return
			}
			for _, part := range tt.wantParts {
				if !strings.Contains(got, part) {
					t.Errorf("body lacks %s\nbody: %s", part, got)
				}
			}
			data := got
			if tt.contentType == "text/event-stream" {
				r := sse.NewReader(strings.NewReader(got))
				for {
					ev, err := r.Next()
					if err != nil {
						t.Fatalf("no response event in %q: %v", got, err)
					}
					if strings.Contains(ev.Data, `"result"`) {
						data = ev.Data
						break
					}
				}
			}
			if !json.Valid([]byte(data)) {
				t.Errorf("rewritten message is not valid JSON: %s", data)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 100) + `"}}`
	tests := []struct {
		name    string
		maxBody int64
		req     func(w http.ResponseWriter) *http.Request
	}{
		{"over max_body", 64, func(http.ResponseWriter) *http.Request { return post(body) }},
		{"over max_body, no Content-Length", 64, func(http.ResponseWriter) *http.Request {
			r := post(body)
			r.ContentLength = -1
			return r
		}},
		// Caddy's request_body max_size before the gateway: the limit is
		// met while reading a body sent without Content-Length.
		{"over an earlier handler's limit", 1 << 20, func(w http.ResponseWriter) *http.Request {
			r := post(body)
			r.ContentLength = -1
			r.Body = http.MaxBytesReader(w, r.Body, 64)
			return r
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{MaxBody: tt.maxBody})
			called := false
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, tt.req(rec), next); err != nil {
				t.Fatal(err)
			}
			if rec.Code != http.StatusRequestEntityTooLarge || called {
				t.Fatalf("status %d, next called %v; want 413 and not called", rec.Code, called)
			}
			var m jsonrpc.Message
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest {
				t.Errorf("body %s is not a JSON-RPC -32600 error", rec.Body)
			}
		})
	}
}

func TestPassThroughUnchanged(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	tests := []struct {
		name, method, body string
	}{
		{"GET stream", http.MethodGet, ""},
		{"DELETE session", http.MethodDelete, ""},
		{"other method", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`},
		{"notification", http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{"client response", http.MethodPost, `{"jsonrpc":"2.0","id":5,"result":{}}`},
		{"modern request", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
		{"modern malformed tools/call", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`},
		{"modern listen without taskIds", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gotBody string
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				gotBody = string(b)
				w.Header().Set("X-Upstream", "yes")
				w.WriteHeader(http.StatusTeapot)
			})
			r := httptest.NewRequest(tt.method, "/mcp", strings.NewReader(tt.body))
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, r, next); err != nil {
				t.Fatal(err)
			}
			if rec.Code != http.StatusTeapot || rec.Header().Get("X-Upstream") != "yes" {
				t.Errorf("answer not from upstream: %d", rec.Code)
			}
			if gotBody != tt.body {
				t.Errorf("upstream body = %q, want %q", gotBody, tt.body)
			}
		})
	}
}

func TestRebindingGuard(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8080}
	tests := []struct {
		name   string
		local  net.Addr
		host   string
		origin string
		want   int
	}{
		{"loopback, localhost host", loopback, "localhost:8080", "", http.StatusOK},
		{"loopback, 127.0.0.1 with origin", loopback, "127.0.0.1:8080", "http://localhost:3000", http.StatusOK},
		{"loopback, foreign host", loopback, "evil.example.com", "", http.StatusForbidden},
		{"loopback, foreign origin", loopback, "localhost:8080", "http://evil.example.com", http.StatusForbidden},
		{"loopback, names under localhost", loopback, "mcp.localhost:8080", "http://App.Localhost.:3000", http.StatusOK},
		{"loopback, localhost. with a dot", loopback, "LOCALHOST.:8080", "", http.StatusOK},
		{"loopback, localhost inside a foreign name", loopback, "localhost.evil.example.com", "", http.StatusForbidden},
		{"loopback, a name ending in localhost", loopback, "evillocalhost:8080", "", http.StatusForbidden},
		{"loopback, foreign origin under a localhost host", loopback, "a.localhost:8080", "http://localhost.evil.example.com", http.StatusForbidden},
		{"public listener, any host", public, "mcp.example.com", "https://app.example.com", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tt.local))
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
		})
	}
}

// TestPassThroughAllocs holds what the gateway allocates for a request it
// only passes on (the body, the envelope it parses, with the reader that
// hands the body on, and that reader's GetBody): every request of a busy
// MCP server pays it. An error check that ran on every request once added
// one.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestPassThroughAllocs(t *testing.T) {
	g := testGateway(t, Config{})
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"file:///a"}}`)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	const runs = 100
	reqs := make([]*http.Request, runs+1) // AllocsPerRun runs once more, to warm up
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	}
	_ = g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body)), next) // starts the runtime
	// AllocsPerRun counts every goroutine's allocations, and the runtime's
	// background work (recovery, the sweeper) allocates now and then: the
	// least of a few rounds is what passing a request on costs.
	allocs := math.Inf(1)
	for range 5 {
		w, i := httptest.NewRecorder(), 0
		for j := range reqs {
			reqs[j] = httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		}
		allocs = min(allocs, testing.AllocsPerRun(runs, func() {
			if err := g.ServeHTTP(w, reqs[i], next); err != nil {
				t.Fatal(err)
			}
			i++
		}))
	}
	if allocs > 3 {
		t.Errorf("passing a request on made %.0f allocations, want at most 3", allocs)
	}
}
