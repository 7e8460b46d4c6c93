package integration

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A web page can make a browser POST to any site without a CORS preflight
// as long as the request is "simple": Content-Type text/plain, a form
// type, or none. The browser attaches the site's ambient credentials
// (cookies of a forward_auth login, cached basic_auth credentials). MCP
// servers refuse such requests, since MCP posts are application/json (the
// official SDKs answer 415), and a request that passes through the gateway
// still meets that check upstream. A request the gateway answers or runs
// itself must meet it at the gateway: a task's call reaches the upstream
// as the gateway's own application/json request, on behalf of the caller
// the ambient credentials name.
func TestCrossSiteSimpleRequestsRunNoTask(t *testing.T) {
	t.Parallel()
	hash, err := exec.Command(caddyBinary, "hash-password", "--plaintext", "pw").Output()
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	srv := mcp.NewServer(&mcp.Implementation{Name: "sessionless", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "transfer", Description: "moves the caller's money"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "transferred"}}}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true}))
	t.Cleanup(up.Close)
	gw := startGateway(t, gatewayOptions{
		Upstream:       strings.TrimPrefix(up.URL, "http://"),
		SiteDirectives: "basic_auth /mcp* {\nalice " + strings.TrimSpace(string(hash)) + "\n}",
		Directives:     "principal {http.auth.user.id}\ntool transfer optional",
	})
	alice := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:pw"))
	send := func(t *testing.T, contentType string, headers map[string]string) (int, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer","arguments":{},"task":{"ttl":60000}}}`
		req, _ := http.NewRequest(http.MethodPost, gw.URL, strings.NewReader(body))
		req.Header.Set("Authorization", alice) // what the browser attaches by itself
		req.Header.Set("Accept", "application/json, text/event-stream")
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(data)
	}
	crossSite := map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}
	for _, tt := range []struct {
		name, contentType string
		headers           map[string]string
	}{
		{"text/plain", "text/plain;charset=UTF-8", crossSite},
		{"form", "application/x-www-form-urlencoded", crossSite},
		{"multipart", "multipart/form-data; boundary=x", crossSite},
		{"no content type from a page", "", crossSite},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := send(t, tt.contentType, tt.headers)
			if status != http.StatusUnsupportedMediaType || strings.Contains(body, `"taskId"`) {
				t.Errorf("HTTP %d %s, want 415 and no task", status, body)
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // a task's call would have reached the upstream by now
	if n := calls.Load(); n != 0 {
		t.Errorf("the upstream ran the tool %d times for requests a browser sends cross-site without a preflight", n)
	}
	t.Run("an MCP client's own request", func(t *testing.T) {
		status, body := send(t, "application/json", nil)
		if status != http.StatusOK || !strings.Contains(body, `"taskId"`) {
			t.Fatalf("HTTP %d %s, want a task", status, body)
		}
		waitFor(t, 10*time.Second, "the task's call upstream", func() bool { return calls.Load() == 1 })
	})
}
