package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A header that servers mapping headers CGI-style read as Mcp-Session-Id
// is refused however the client spells it on the wire. Caddy drops every
// header with an underscore unless its server's expected_underscore_headers
// keeps it; where it does, Caddy's server hands the gateway the name
// canonical, which is where the gateway looks for it.
func TestSessionHeaderSpellingsOnTheWire(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools,
		GlobalOptions: "servers {\nexpected_underscore_headers mcp_session_id mcp-session_id mcp_session-id\n}"})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, header := range []string{"mcp_session_id", "MCP_SESSION_ID", "Mcp_Session-Id", "mcp-SESSION_id"} {
		t.Run(header, func(t *testing.T) {
			t.Parallel()
			conn, err := net.Dial("tcp", gw.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second)) // a bound on a hang, not a timing
			// Written by hand: Go's client would send the name canonical.
			fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
				"Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\n"+
				"%s: someone-elses-session\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", gw.addr, header, len(body), body)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "spelled Mcp-Session-Id") {
				t.Errorf("HTTP %d %s, want 400 saying the session header is spelled Mcp-Session-Id", resp.StatusCode, data)
			}
		})
	}
}
