package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sessionRequest sends method to url as the bearer of token, naming
// session, and returns what a client observes. Event streams are read only
// up to their first event (a GET stream never ends).
func sessionRequest(t *testing.T, method, url, token, session string, headers map[string]string) rawAnswer {
	t.Helper()
	if method == http.MethodPost {
		return postRaw(t, url, token, session, headers, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return rawAnswer{resp.StatusCode, "(event stream)"} // the owner's stream: not read
	}
	data, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, string(data)}
}

// A 2025-11-25 session belongs to the principal whose initialize answer
// named it. Bob using alice's session id, with any method and version
// header, gets exactly the answer of a session that never existed, and
// nothing reaches the go-sdk upstream: alice's session survives even bob's
// DELETE. Random ids change nothing, and a restart of the gateway on the
// same storage (the upstream keeps running, with alice's session) keeps
// the binding.
func TestSessionBindingEndToEnd(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	opts := gatewayOptions{Upstream: addr, StorageDir: filepath.Join(t.TempDir(), "store"), Directives: v2025Tools + hmacAuth}
	gw := startGateway(t, opts)
	aliceToken, bobToken := hmacToken(t, "alice", "t1"), hmacToken(t, "bob", "t1")
	alice := newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer "+aliceToken)
	alice.initialize("")
	if alice.session == "" {
		t.Fatal("the upstream opened no session")
	}
	bob := newRPCClient(t, gw.URL)
	bob.header.Set("Authorization", "Bearer "+bobToken)
	bob.initialize("")

	v2026 := map[string]string{"Mcp-Protocol-Version": "2026-07-28"}
	probes := []struct {
		name    string
		method  string
		headers map[string]string
	}{
		{"POST", http.MethodPost, nil},
		{"POST with the 2026 version header", http.MethodPost, v2026},
		{"GET", http.MethodGet, nil},
		{"DELETE", http.MethodDelete, nil},
		{"DELETE with the 2026 version header", http.MethodDelete, v2026},
	}
	aliceServed := func(t *testing.T) {
		t.Helper()
		if m := alice.call("tools/list", nil); m.Error != nil || !strings.Contains(string(m.Result), "slow_compute") {
			t.Fatalf("alice on her session: %s / %+v", m.Result, m.Error)
		}
	}
	check := func(t *testing.T) {
		t.Helper()
		for _, p := range probes {
			foreign := sessionRequest(t, p.method, alice.url, bobToken, alice.session, p.headers)
			never := sessionRequest(t, p.method, alice.url, bobToken, "never-minted-"+fmt.Sprint(time.Now().UnixNano()), p.headers)
			if foreign.status != http.StatusNotFound || foreign != never || !strings.Contains(foreign.body, "-32001") {
				t.Errorf("bob's %s on alice's session: %d %s\nan unknown session: %d %s\nwant both 404 -32001 Session not found",
					p.name, foreign.status, foreign.body, never.status, never.body)
			}
			aliceServed(t) // bob's request reached no one: alice's session lives
		}
		if m := bob.call("tools/list", nil); m.Error != nil {
			t.Errorf("bob on his own session: %+v", m.Error)
		}
	}
	t.Run("bob on alice's session", check)

	t.Run("random session ids", func(t *testing.T) {
		for i := range 300 {
			if a := sessionRequest(t, http.MethodPost, alice.url, bobToken, fmt.Sprint("random-", i), nil); a.status != http.StatusNotFound {
				t.Fatalf("random session id %d: %d %s", i, a.status, a.body)
			}
		}
		check(t)
	})

	killGateway(t, gw)
	gw2 := startGateway(t, opts)
	alice.url, bob.url = gw2.URL, gw2.URL
	t.Run("after a restart", check)

	t.Run("alice ends her session", func(t *testing.T) {
		if a := sessionRequest(t, http.MethodDelete, alice.url, aliceToken, alice.session, nil); a.status != http.StatusOK && a.status != http.StatusNoContent && a.status != http.StatusAccepted {
			t.Fatalf("alice's DELETE: %d %s", a.status, a.body)
		}
		if a := sessionRequest(t, http.MethodPost, alice.url, aliceToken, alice.session, nil); a.status != http.StatusNotFound {
			t.Errorf("alice on her ended session: %d %s, want 404", a.status, a.body)
		}
	})
}
