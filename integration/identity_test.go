package integration

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// identityRecorder sits in front of the fixture upstream and records the
// X-User header of every tools/call it receives, by tool.
type identityRecorder struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string][]string
}

func (u *identityRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if bytes.Contains(body, []byte(`"tools/call"`)) {
		for _, tool := range []string{"greet", "slow_compute"} {
			if bytes.Contains(body, []byte(`"name":"`+tool+`"`)) {
				u.mu.Lock()
				u.seen[tool] = append(u.seen[tool], r.Header.Get("X-User"))
				u.mu.Unlock()
			}
		}
	}
	u.next.ServeHTTP(w, r)
}

func (u *identityRecorder) users(tool string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen[tool]...)
}

// A task's upstream call resolves reverse_proxy's placeholders as the plain
// call does: header_up X-User {http.auth.user.id} names the caller on both,
// never the placeholder's text and never another caller.
func TestTaskCallsKeepCallerPlaceholders(t *testing.T) {
	t.Parallel()
	rec := &identityRecorder{next: upstream.New(upstream.Options{}), seen: map[string][]string{}}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	gw := startGateway(t, gatewayOptions{
		Upstream:   addr + " {\n\t\theader_up X-User {http.auth.user.id}\n\t}",
		Directives: v2025Tools + hmacAuth,
	})
	for _, who := range []string{"alice", "bob"} {
		c := newRPCClient(t, gw.URL)
		c.header.Set("Authorization", "Bearer "+hmacToken(t, who, "t1"))
		c.initialize("")
		if resp := c.callTool("slow_compute", map[string]any{"seconds": 0.01, "label": who}, nil); resp.Error != nil {
			t.Fatalf("plain call: %v", resp.Error)
		}
		task := c.createTask("slow_compute", map[string]any{"seconds": 0.01, "label": who}, 60000)
		waitFor(t, 30*time.Second, "the task to complete", func() bool { return c.getTask(task.TaskID).Status == "completed" })
	}
	got := rec.users("slow_compute")
	want := []string{"alice", "alice", "bob", "bob"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("X-User the upstream saw (plain, task; plain, task) = %q, want %q", got, want)
	}
}

// A CORS preflight passes the gateway without authentication, and so it
// passes as a bare preflight: the upstream sees no body, no session and no
// credentials that nobody checked.
func TestPreflightReachesUpstreamBare(t *testing.T) {
	t.Parallel()
	type seen struct {
		body, session, authorization string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{string(body), r.Header.Get("Mcp-Session-Id"), r.Header.Get("Authorization")}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	gw := startCaddyfile(t, func(admin, port string) string {
		return globalHead(admin, "") + `
http://:` + port + ` {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir ` + t.TempDir() + `
` + hmacAuth + `
	}
	reverse_proxy /mcp* ` + strings.TrimPrefix(srv.URL, "http://") + `
}
`
	})
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_everything"}}`
	req, _ := http.NewRequest(http.MethodOptions, gw.URL, strings.NewReader(body))
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Mcp-Session-Id", "someone-elses-session")
	req.Header.Set("Authorization", "Bearer not-a-token")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight: HTTP %d, want the upstream's 204", resp.StatusCode)
	}
	if s := <-got; s != (seen{}) {
		t.Errorf("the upstream saw %+v on a preflight, want no body, session or credentials", s)
	}
}

// An unauthenticated CORS preflight still reaches the upstream (which may
// answer CORS itself), but without an identity: the README's header_up
// X-User {http.auth.user.id} sets X-User to nothing, neither the
// placeholder's literal text nor what the client put in X-User.
func TestPreflightCarriesNoIdentityPlaceholder(t *testing.T) {
	t.Parallel()
	var (
		mu   sync.Mutex
		seen [][]string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			mu.Lock()
			seen = append(seen, r.Header.Values("X-User"))
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, gatewayOptions{
		Upstream:   strings.TrimPrefix(srv.URL, "http://") + " {\n\t\theader_up X-User {http.auth.user.id}\n\t}",
		Directives: hmacAuth,
	})
	for _, spoof := range []string{"", "victim"} {
		req, _ := http.NewRequest(http.MethodOptions, gw.URL, nil)
		req.Header.Set("Origin", "https://app.example.com")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		if spoof != "" {
			req.Header.Set("X-User", spoof)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("preflight: HTTP %d, want the upstream's 204", resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the upstream saw %d preflights, want 2", len(seen))
	}
	for i, got := range seen {
		if len(got) != 1 || got[0] != "" {
			t.Errorf("preflight %d: the upstream saw X-User %q, want one empty value", i+1, got)
		}
	}
}
