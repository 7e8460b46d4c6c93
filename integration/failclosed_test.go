package integration

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// The gateway is fail-closed: a POST body it cannot read exactly as the
// upstream's SDK will is refused, never passed on unread. Each test sends
// what a real SDK runs although the gateway took it for "not JSON-RPC" (or
// read another tool name than the SDK does), and checks it is refused with
// HTTP 400 and nothing runs upstream; the same body with pass_unreadable
// shows the probe is real: the upstream then runs what the gateway's tool
// modes, quota and task table never saw.

// refused posts body on c's session and checks for HTTP 400 with the
// JSON-RPC error code.
func refused(t *testing.T, c *rpcClient, body string, code int) {
	t.Helper()
	status, answer := postBody(t, c, body)
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if status != http.StatusBadRequest || json.Unmarshal([]byte(answer), &m) != nil || m.Error == nil || m.Error.Code != code {
		t.Errorf("%s: HTTP %d %s; want 400 with error %d", body, status, answer, code)
	}
}

// postBody posts body as is on c's session and returns the status and the
// answer (the first event of a stream).
func postBody(t *testing.T, c *rpcClient, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp := c.post(ctx, []byte(body))
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	answer := string(raw)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.SplitSeq(answer, "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && strings.HasPrefix(data, "{") {
				return resp.StatusCode, data
			}
		}
	}
	return resp.StatusCode, answer
}

// Batches: the TypeScript SDK v1 (server-everything) runs every element.
func TestBatchesRefused(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	one := `[{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"message":"batched call ran"}}}]`
	var tasks []string
	for i := range 10 {
		tasks = append(tasks, `{"jsonrpc":"2.0","id":`+strconv.Itoa(100+i)+`,"method":"tools/call","params":{"name":"simulate-research-query","arguments":{"topic":"x"},"task":{"ttl":60000}}}`)
	}
	ten := "[" + strings.Join(tasks, ",") + "]"

	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "tool echo required\nmax_active_per_principal 2"})
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{},"sampling":{}}`)
	refused(t, c, one, -32600)
	refused(t, c, ten, -32600)

	t.Run("pass_unreadable runs them upstream", func(t *testing.T) {
		open := startGateway(t, gatewayOptions{Upstream: addr, Directives: "tool echo required\npass_unreadable"})
		c := newRPCClient(t, open.URL)
		c.initialize(`{"elicitation":{},"sampling":{}}`)
		if status, answer := postBody(t, c, one); !strings.Contains(answer, "batched call ran") {
			t.Errorf("a batch passed on: HTTP %d %s; want the upstream's echo (the probe is not what the SDK runs)", status, answer)
		}
	})
}

// Bytes after the message: go-sdk's decoder reads the first value and runs
// it.
func TestTrailingBytesRefused(t *testing.T) {
	t.Parallel()
	const plain = `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"failing_job","arguments":{}}}`
	bodies := []string{plain + "x", plain + plain, plain + "}", plain + " 1"}

	t.Run("2025-11-25", func(t *testing.T) {
		c, _, up := v2025Setup(t, "")
		for _, body := range bodies {
			refused(t, c, body, -32700)
		}
		if n := up.Calls("failing_job"); n != 0 {
			t.Errorf("the upstream ran failing_job %d times", n)
		}
	})
	t.Run("2026-07-28", func(t *testing.T) {
		c, _, up := v2026Setup(t)
		c.declare = false // so that the required tool is -32021, were the body read
		_, body := c.body("tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}})
		for _, tail := range []string{"x", string(body), "}"} {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			req := c.newRequest(ctx, append(append([]byte{}, body...), tail...))
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "failing_job")
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"code":-32700`) {
				t.Errorf("trailing %q: HTTP %d %s; want 400 with -32700", tail, resp.StatusCode, raw)
			}
		}
		if n := up.Calls("failing_job"); n != 0 {
			t.Errorf("the upstream ran failing_job %d times", n)
		}
	})
	t.Run("pass_unreadable runs it upstream", func(t *testing.T) {
		c, _, up := v2025Setup(t, "pass_unreadable")
		postBody(t, c, plain+"x")
		if n := up.Calls("failing_job"); n != 1 {
			t.Errorf("the upstream ran failing_job %d times, want 1 (the probe is not what go-sdk runs)", n)
		}
	})
}

// mcpGoUpstream is a real mcp-go server (Go's encoding/json: keys match
// under Unicode case folding, the last duplicate wins) with a harmless and
// a dangerous tool, counting the dangerous tool's runs.
func mcpGoUpstream(t *testing.T) (addr string, dangerous *atomic.Int32) {
	t.Helper()
	dangerous = new(atomic.Int32)
	s := server.NewMCPServer("mcp-go-upstream", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("safe_tool"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("safe"), nil
	})
	s.AddTool(mcp.NewTool("dangerous_tool"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		dangerous.Add(1)
		return mcp.NewToolResultText("dangerous ran"), nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().String(), dangerous
}

// Keys another reader matches differently: mcp-go reads "jſonrpc" (U+017F)
// as "jsonrpc", and of "name" and "NAME" takes the last.
func TestFoldedKeysRefused(t *testing.T) {
	t.Parallel()
	addr, dangerous := mcpGoUpstream(t)
	bodies := []string{
		"{\"j\u017fonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"dangerous_tool\",\"arguments\":{}}}",
		`{"j\u017fonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"dangerous_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"safe_tool","NAME":"dangerous_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"safe_tool","name":"dangerous_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"safe_tool","N\u0041ME":"dangerous_tool","arguments":{}}}`,
	}
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "tool dangerous_tool required"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	for _, body := range bodies {
		refused(t, c, body, -32600)
	}
	if n := dangerous.Load(); n != 0 {
		t.Errorf("mcp-go ran dangerous_tool %d times through the gateway", n)
	}

	t.Run("pass_unreadable runs it upstream", func(t *testing.T) {
		open := startGateway(t, gatewayOptions{Upstream: addr, Directives: "tool dangerous_tool required\npass_unreadable"})
		c := newRPCClient(t, open.URL)
		c.initialize("")
		before := dangerous.Load()
		for _, body := range bodies[:3] {
			postBody(t, c, body)
		}
		if n := dangerous.Load() - before; n != 3 {
			t.Errorf("mcp-go ran dangerous_tool %d times of 3 (the probes are not what mcp-go runs)", n)
		}
	})
}
