package taskproxy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The rebinding guard applies where it protects something: by default to
// anonymous callers on a loopback listener that did not come through a
// trusted proxy; "on" and "off" force it.
func TestRebindingModes(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	alice := task.Caller{Owner: "alice", Principal: "alice"}
	tests := []struct {
		name   string
		mode   RebindingProtection
		caller *task.Caller
		peer   *task.Peer
		host   string
		want   int
	}{
		{"auto, anonymous, foreign host", "", nil, nil, "mcp.example.com", http.StatusForbidden},
		{"auto, anonymous, localhost", RebindingAuto, nil, nil, "localhost:8080", http.StatusOK},
		{"auto, authenticated, foreign host", RebindingAuto, &alice, nil, "mcp.example.com", http.StatusOK},
		{"auto, anonymous via trusted proxy", RebindingAuto, nil, &task.Peer{ClientIP: "203.0.113.9", ViaTrustedProxy: true}, "mcp.example.com", http.StatusOK},
		{"auto, anonymous via untrusted peer", RebindingAuto, nil, &task.Peer{ClientIP: "127.0.0.1"}, "mcp.example.com", http.StatusForbidden},
		{"on, authenticated, foreign host", RebindingOn, &alice, nil, "mcp.example.com", http.StatusForbidden},
		{"on, via trusted proxy", RebindingOn, nil, &task.Peer{ClientIP: "203.0.113.9", ViaTrustedProxy: true}, "mcp.example.com", http.StatusForbidden},
		{"off, anonymous, foreign host", RebindingOff, nil, nil, "mcp.example.com", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{RebindingProtection: tt.mode})
			r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`)
			r.Host = tt.host
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, loopback))
			if tt.caller != nil {
				r = WithCaller(r, *tt.caller)
			}
			if tt.peer != nil {
				r = WithPeer(r, *tt.peer)
			}
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
				t.Fatal(err)
			}
			// A task id nobody has is -32602 with HTTP 200 or 400; the guard is 403.
			if got := rec.Code == http.StatusForbidden; got != (tt.want == http.StatusForbidden) {
				t.Errorf("status %d, want 403: %v (%s)", rec.Code, tt.want == http.StatusForbidden, rec.Body)
			}
		})
	}
}

func TestParseRebindingProtection(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]RebindingProtection{"": RebindingAuto, "auto": RebindingAuto, "on": RebindingOn, "off": RebindingOff} {
		if got, err := ParseRebindingProtection(in); err != nil || got != want {
			t.Errorf("%q: %q, %v", in, got, err)
		}
	}
	if _, err := ParseRebindingProtection("sometimes"); err == nil {
		t.Error("unknown mode accepted")
	}
}

// task.Anonymous callers are rate-limited by the client address the glue
// determined (Caddy's client_ip), not by the proxy that connected.
func TestRateLimitKeyIsClientIP(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{RateLimit: 1}) // bursts of 2
	send := func(clientIP string) int {
		r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`)
		r.RemoteAddr = "10.0.0.1:4000" // the same front proxy for everybody
		if clientIP != "" {
			r = WithPeer(r, task.Peer{ClientIP: clientIP, ViaTrustedProxy: true})
		}
		rec := httptest.NewRecorder()
		if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
			t.Fatal(err)
		}
		return rec.Code
	}
	for range 2 {
		if code := send("198.51.100.1"); code == http.StatusTooManyRequests {
			t.Fatal("limited within the burst")
		}
	}
	if code := send("198.51.100.1"); code != http.StatusTooManyRequests {
		t.Errorf("third request of one client: %d, want 429", code)
	}
	if code := send("198.51.100.2"); code == http.StatusTooManyRequests {
		t.Error("another client behind the same proxy shares the first one's bucket")
	}
	// Without a peer from the glue, the connection's address is the key.
	for range 2 {
		send("")
	}
	if code := send(""); code != http.StatusTooManyRequests {
		t.Errorf("third request without a peer: %d, want 429", code)
	}
}

// A post a page can send cross-site without a preflight is refused for
// what the gateway answers itself, whoever the caller; an MCP client's
// post (application/json), or a non-browser one without a type, is not.
func TestCrossSiteSimple(t *testing.T) {
	t.Parallel()
	alice := task.Caller{Owner: "alice", Principal: "alice"}
	tests := []struct {
		name, method, contentType, origin string
		want                              bool
	}{
		{"json", http.MethodPost, "application/json", "", false},
		{"json with charset and origin", http.MethodPost, "Application/JSON; charset=utf-8", "https://app.example", false},
		{"text/plain", http.MethodPost, "text/plain;charset=UTF-8", "https://evil.example", true},
		{"text/plain without origin", http.MethodPost, "text/plain", "", true},
		{"form", http.MethodPost, "application/x-www-form-urlencoded", "", true},
		{"multipart", http.MethodPost, "multipart/form-data; boundary=x", "https://evil.example", true},
		{"no type from a page", http.MethodPost, "", "https://evil.example", true},
		{"no type, no page", http.MethodPost, "", "", false},
		{"a GET resuming a stream", http.MethodGet, "", "https://evil.example", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, "/mcp", nil)
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if got := gate.CrossSiteSimple(r); got != tt.want {
				t.Errorf("CrossSiteSimple = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("an authenticated caller's tasks/get", func(t *testing.T) {
		g := testGateway(t, Config{})
		r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`, "Content-Type", "text/plain", "Origin", "https://evil.example")
		rec := httptest.NewRecorder()
		if err := g.ServeHTTP(rec, WithCaller(r, alice), http.NotFoundHandler()); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusUnsupportedMediaType {
			t.Errorf("HTTP %d %s, want 415", rec.Code, rec.Body)
		}
	})
}
