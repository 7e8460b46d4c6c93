package taskproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Config.Peer reports the client of a request as the server determined it
// (Caddy's client_ip behind trusted proxies): anonymous callers are told
// apart by it, not by the connection's address, and a request it knows
// nothing of (ok false) falls back to what its context carries.
func TestConfigPeer(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{
		RateLimit: 0.5, // a burst of one task operation per client
		Peer: func(r *http.Request) (task.Peer, bool) {
			ip := r.Header.Get("X-Test-Client")
			return task.Peer{ClientIP: ip}, ip != ""
		},
	})
	mustStart(t, g)
	get := func(client, ctxClient string) int {
		r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"none"}}`, "MCP-Protocol-Version", "2025-11-25")
		r.RemoteAddr = "192.0.2.1:4000" // one proxy's connection for every client
		if client != "" {
			r.Header.Set("X-Test-Client", client)
		}
		if ctxClient != "" {
			r = WithPeer(r, task.Peer{ClientIP: ctxClient})
		}
		rec := httptest.NewRecorder()
		if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
			t.Fatal(err)
		}
		return rec.Code
	}
	steps := []struct {
		name, client, ctxClient string
		want                    int
	}{
		{"first client", "198.51.100.1", "", http.StatusOK},
		{"second client, same connection address", "198.51.100.2", "", http.StatusOK},
		{"first client again, over its rate", "198.51.100.1", "", http.StatusTooManyRequests},
		{"unknown to Peer: the context's client", "", "198.51.100.3", http.StatusOK},
		{"Peer's word over the context's", "198.51.100.2", "198.51.100.4", http.StatusTooManyRequests},
	}
	for _, s := range steps {
		if got := get(s.client, s.ctxClient); got != s.want {
			t.Errorf("%s: HTTP %d, want %d", s.name, got, s.want)
		}
	}
}
