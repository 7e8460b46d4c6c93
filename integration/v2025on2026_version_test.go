package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// TestReverseBridgeSessionVersion: a reverse-bridge session speaks
// 2025-11-25; a request on it whose MCP-Protocol-Version header names
// another version (2026-07-28 included) gets HTTP 400 with -32600, one
// without the header is taken as the session's.
func TestReverseBridgeSessionVersion(t *testing.T) {
	t.Parallel()
	_, gw := reverseGateway(t)
	alice := reverseClient(t, gw, "alice")
	alice.initialize(`{}`)
	auth := alice.header.Get("Authorization")
	ctx := context.Background()

	// The DELETE refused first leaves the session open for the pings after it.
	for _, tt := range []struct {
		method, version string
		status          int
	}{
		{http.MethodDelete, "2024-11-05", http.StatusBadRequest},
		{http.MethodPost, "2025-11-25", http.StatusOK}, {http.MethodPost, "", http.StatusOK},
		{http.MethodPost, "2026-07-28", http.StatusBadRequest}, {http.MethodPost, "2024-11-05", http.StatusBadRequest},
	} {
		body, _ := jsonrpc.RequestBytes(json.RawMessage("7"), "ping", nil)
		if tt.method != http.MethodPost {
			body = nil
		}
		req, _ := http.NewRequestWithContext(ctx, tt.method, gw.URL, bytes.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", alice.session)
		if tt.version != "" {
			req.Header.Set("Mcp-Protocol-Version", tt.version)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var m jsonrpc.Message
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s with MCP-Protocol-Version %q: HTTP %d, want %d", tt.method, tt.version, resp.StatusCode, tt.status)
		}
		if tt.status == http.StatusBadRequest && (m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(m.Error.Message, tt.version)) {
			t.Errorf("%s with MCP-Protocol-Version %q: error %+v, want -32600 naming the version", tt.method, tt.version, m.Error)
		}
	}
}
