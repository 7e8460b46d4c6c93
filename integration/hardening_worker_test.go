package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// postV2026 posts one 2026-07-28 request with its routing headers and
// returns the raw HTTP answer, read in full.
func postV2026(t *testing.T, c *v2026Client, method string, params map[string]any, headers ...string) (*http.Response, []byte) {
	t.Helper()
	_, body := c.body(method, params)
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if name, ok := params["taskId"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// A 2026-07-28 call answered before task_after is passed through as the
// upstream gave it: an HTTP 401 with WWW-Authenticate (how MCP authorization
// discovery starts) reaches the client as such, not as HTTP 200 with a
// JSON-RPC error.
func TestV2026PassThroughKeepsUpstreamStatus(t *testing.T) {
	t.Parallel()
	const challenge = `Bearer resource_metadata="http://example.test/.well-known/oauth-protected-resource"`
	up := upstream.New(upstream.Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			up.ServeHTTP(w, r)
		case "Bearer json":
			w.Header().Set("WWW-Authenticate", challenge)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"unauthorized"}}`)
		default:
			w.Header().Set("WWW-Authenticate", challenge)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_token"}`)
		}
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimPrefix(srv.URL, "http://"), Directives: "task_after 5s\ntool big_result required"})
	c := newV2026Client(t, gw.URL, true)
	call := map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}}

	t.Run("401 with a plain body", func(t *testing.T) {
		resp, body := postV2026(t, c, "tools/call", call)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != challenge {
			t.Fatalf("HTTP %d, WWW-Authenticate %q, body %s; want 401 with the upstream's challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
		if string(body) != `{"error":"invalid_token"}` {
			t.Errorf("body %s, want the upstream's", body)
		}
	})
	t.Run("401 with a JSON-RPC body", func(t *testing.T) {
		resp, body := postV2026(t, c, "tools/call", call, "Authorization", "Bearer json")
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != challenge {
			t.Fatalf("HTTP %d, WWW-Authenticate %q, body %s; want 401 with the upstream's challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Error == nil || m.Error.Message != "unauthorized" || strings.Contains(string(m.ID), "mcp-tasks:") {
			t.Errorf("body %s: want the upstream's error under the client's id", body)
		}
	})
	t.Run("401 for a tool that always runs as a task", func(t *testing.T) {
		resp, body := postV2026(t, c, "tools/call", map[string]any{"name": "big_result", "arguments": map[string]any{"bytes": 1}})
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != challenge {
			t.Fatalf("HTTP %d, WWW-Authenticate %q, body %s; want 401 with the upstream's challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	})
	t.Run("authorized", func(t *testing.T) {
		resp, body := postV2026(t, c, "tools/call", call, "Authorization", "Bearer good")
		m, err := jsonrpc.Parse(body)
		if resp.StatusCode != http.StatusOK || err != nil || m.Result == nil {
			t.Fatalf("HTTP %d %s", resp.StatusCode, body)
		}
	})
}

// Oversized id and answer lists get -32602 with the limit, through the real
// binary.
func TestOversizedListsRefusedEndToEnd(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr})
	c := newV2026Client(t, gw.URL, true)
	ids := make([]string, 1001)
	for i := range ids {
		ids[i] = fmt.Sprint("task-", i)
	}
	answers := map[string]any{}
	for i := range 1001 {
		answers[fmt.Sprint(i)] = map[string]any{"action": "accept"}
	}
	tests := []struct {
		name, method string
		params       map[string]any
	}{
		{"subscriptions/listen", "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}}},
		{"tasks/update", "tasks/update", map[string]any{"taskId": "nope", "inputResponses": answers}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := postV2026(t, c, tt.method, tt.params)
			m, err := jsonrpc.Parse(body)
			if err != nil || m.Error == nil {
				t.Fatalf("HTTP %d %.300s: not a JSON-RPC error", resp.StatusCode, body)
			}
			if resp.StatusCode != http.StatusBadRequest || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "1000") {
				t.Errorf("HTTP %d %d %q, want 400 -32602 naming the limit", resp.StatusCode, m.Error.Code, m.Error.Message)
			}
		})
	}
}

// An upstream result over the configured max_result fails the task with the
// size and the limit; one under it completes.
func TestResultTooLargeEndToEnd(t *testing.T) {
	t.Parallel()
	c, _, _ := v2025Setup(t, "max_result 2MiB")
	tests := []struct {
		bytes      int
		wantStatus string
		wantMsg    string
	}{
		{3 << 20, "failed", "result too large ("},
		{1 << 20, "completed", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.bytes), func(t *testing.T) {
			task := c.createTask("big_result", map[string]any{"bytes": tt.bytes}, 60000)
			var got v2025Task
			waitFor(t, 30*time.Second, "the task to end", func() bool {
				got = c.getTask(task.TaskID)
				return got.Status != "working"
			})
			if got.Status != tt.wantStatus || !strings.Contains(got.StatusMessage, tt.wantMsg) || (tt.wantMsg != "" && !strings.Contains(got.StatusMessage, "limit 2097152)")) {
				t.Errorf("task %s %q, want %s with %q", got.Status, got.StatusMessage, tt.wantStatus, tt.wantMsg)
			}
		})
	}
}

// A message whose id JSON-RPC does not allow is answered by the gateway:
// -32700 when the id is not valid JSON, -32600 when it is of the wrong kind.
func TestInvalidIDsEndToEnd(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr})
	tests := []struct {
		name, body string
		code       int
	}{
		{"unparseable id", `{"jsonrpc":"2.0","id":01x,"method":"tools/list"}`, -32700},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}`, -32600},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"},"task":{}}}`, -32600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, gw.URL, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			m, err := jsonrpc.Parse(data)
			if err != nil || m.Error == nil || m.Error.Code != tt.code || resp.StatusCode != http.StatusBadRequest {
				t.Errorf("HTTP %d %s, want 400 with error %d", resp.StatusCode, data, tt.code)
			}
		})
	}
}

// A 2026-07-28 call the gateway passes through without making a task of it
// (the tool is forbidden to run as a task) reaches the upstream without the
// tasks extension in its client capabilities.
func TestForbiddenPassThroughStripsTasksExtension(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{})
	var mu sync.Mutex
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/call"`) {
			mu.Lock()
			calls = append(calls, string(body))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimPrefix(srv.URL, "http://"), Directives: "tool greet forbidden"})
	c := newV2026Client(t, gw.URL, true)
	res := c.ok("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}})
	if !strings.Contains(string(res["content"]), "Hello, x!") {
		t.Fatalf("result %v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || strings.Contains(calls[0], "io.modelcontextprotocol/tasks") || !strings.Contains(calls[0], "clientCapabilities") {
		t.Errorf("upstream saw %q, want one call without the tasks extension", calls)
	}
}
