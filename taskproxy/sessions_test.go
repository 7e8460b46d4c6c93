package taskproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestBadgerSessionBindings(t *testing.T) {
	t.Parallel()
	// In a bubble: the store's clock is the bubble's, which the ttl's
	// expiry below advances without waiting.
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := newMemStore(t)
		if err := s.BindSession(ctx, "S1", "alice", time.Hour); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name string
			op   func() error
			want error // nil, ErrForeign or ErrNotFound (exactly: not ErrForeign)
		}{
			{"owner checks", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, nil},
			{"owner checks and refreshes", func() error { return s.CheckSession(ctx, "S1", "alice", time.Hour) }, nil},
			{"another owner", func() error { return s.CheckSession(ctx, "S1", "bob", time.Hour) }, task.ErrForeign},
			{"unknown session", func() error { return s.CheckSession(ctx, "S2", "alice", time.Hour) }, task.ErrNotFound},
			{"unknown session is not created by a refresh", func() error { return s.CheckSession(ctx, "S2", "alice", 0) }, task.ErrNotFound},
			{"binding to another owner refused", func() error { return s.BindSession(ctx, "S1", "bob", time.Hour) }, task.ErrForeign},
			{"still the owner's", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, nil},
			{"owner binds again", func() error { return s.BindSession(ctx, "S1", "alice", time.Hour) }, nil},
			{"forget", func() error { return s.ForgetSession(ctx, "S1") }, nil},
			{"forgotten", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, task.ErrNotFound},
			{"forget unknown", func() error { return s.ForgetSession(ctx, "S9") }, nil},
		}
		for _, tt := range tests {
			err := tt.op()
			switch {
			case tt.want == nil && err != nil,
				tt.want != nil && !errors.Is(err, tt.want),
				errors.Is(tt.want, task.ErrNotFound) && !errors.Is(tt.want, task.ErrForeign) && errors.Is(err, task.ErrForeign):
				t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
			}
		}

		// A binding idle for its ttl expires.
		if err := s.BindSession(ctx, "short", "alice", time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckSession(ctx, "short", "alice", 0); err != nil {
			t.Fatalf("a binding with a 1s ttl, right away: %v", err)
		}
		time.Sleep(2 * time.Second) // the bubble's clock: no waiting
		if err := s.CheckSession(ctx, "short", "alice", 0); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("a binding idle for twice its 1s ttl: %v, want task.ErrNotFound", err)
		}
	})
}

// sessionUpstream is an MCP server stand-in that mints a session id per
// initialize and counts what reaches it.
type sessionUpstream struct {
	mu      sync.Mutex
	next    int
	live    map[string]bool
	reached []string // method and session of each request that got here
}

func (u *sessionUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	defer u.mu.Unlock()
	sid := r.Header.Get(upstream.HeaderSessionID)
	u.reached = append(u.reached, r.Method+" "+sid)
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPost && strings.Contains(string(body), `"initialize"`):
		u.next++
		sid = fmt.Sprintf("session-%d", u.next)
		u.live[sid] = true
		w.Header().Set(upstream.HeaderSessionID, sid)
		wire.WriteJSON(w, http.StatusOK, []byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{}}}`))
	case !u.live[sid]:
		http.Error(w, "unknown session", http.StatusNotFound)
	case r.Method == http.MethodDelete:
		delete(u.live, sid)
		w.WriteHeader(http.StatusOK)
	default:
		wire.WriteJSON(w, http.StatusOK, []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`))
	}
}

func (u *sessionUpstream) reachedCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reached)
}

// A session belongs to the principal whose initialize answer named it:
// another principal gets the answer of an unknown session on every method
// and version header, the upstream never sees those requests, random ids
// never displace bindings, and bindings survive a restart. The runtime
// opens its store when the gateway first serves, as Caddy's does.
func TestSessionBinding(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() (*Gateway, task.Store) {
		s := openTestStore(t, dir, false)
		g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, NewLazyRuntime(func() (task.Store, error) { return s, nil }))
		if err != nil {
			t.Fatal(err)
		}
		return g, s
	}
	g, _ := open()
	up := &sessionUpstream{live: map[string]bool{}}
	send := func(g *Gateway, who, method, sid string, headers ...string) (int, string) {
		t.Helper()
		var r *http.Request
		if method == http.MethodPost {
			r = post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, headers...)
		} else {
			r = httptest.NewRequest(method, "/mcp", nil)
			for i := 0; i+1 < len(headers); i += 2 {
				r.Header.Set(headers[i], headers[i+1])
			}
		}
		if sid != "" {
			r.Header.Set(upstream.HeaderSessionID, sid)
		}
		r = WithCaller(r, task.Caller{Owner: who, Principal: who})
		w := httptest.NewRecorder()
		if err := g.ServeHTTP(w, r, up); err != nil {
			t.Fatal(err)
		}
		return w.Code, w.Body.String()
	}
	initialize := func(g *Gateway, who string) string {
		t.Helper()
		r := WithCaller(post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), task.Caller{Owner: who})
		w := httptest.NewRecorder()
		if err := g.ServeHTTP(w, r, up); err != nil {
			t.Fatal(err)
		}
		sid := w.Header().Get(upstream.HeaderSessionID)
		if w.Code != http.StatusOK || sid == "" {
			t.Fatalf("initialize: %d %s", w.Code, w.Body)
		}
		return sid
	}
	alice := initialize(g, "alice")
	bobs := initialize(g, "bob")
	_, unknownBody := send(g, "bob", http.MethodPost, "never-minted")

	probes := []struct {
		name    string
		method  string
		headers []string
	}{
		{"POST", http.MethodPost, nil},
		{"POST 2026", http.MethodPost, []string{upstream.HeaderProtocolVersion, "2026-07-28"}},
		{"GET", http.MethodGet, []string{"Accept", "text/event-stream"}},
		{"DELETE", http.MethodDelete, nil},
		{"DELETE 2026", http.MethodDelete, []string{upstream.HeaderProtocolVersion, "2026-07-28"}},
	}
	refused := func(g *Gateway, phase string) {
		t.Helper()
		for _, p := range probes {
			before := up.reachedCount()
			code, body := send(g, "bob", p.method, alice, p.headers...)
			if code != http.StatusNotFound || body != unknownBody || !strings.Contains(body, `-32001`) {
				t.Errorf("%s: bob's %s on alice's session: %d %s, want the unknown session's 404 %s", phase, p.name, code, body, unknownBody)
			}
			if up.reachedCount() != before {
				t.Errorf("%s: bob's %s on alice's session reached the upstream", phase, p.name)
			}
		}
		if code, _ := send(g, "alice", http.MethodPost, alice); code != http.StatusOK {
			t.Errorf("%s: alice on her own session: %d", phase, code)
		}
	}
	refused(g, "first use by bob")
	if code, _ := send(g, "bob", http.MethodPost, bobs); code != http.StatusOK {
		t.Errorf("bob on his own session: %d", code)
	}

	// Random ids are refused and leave no trace: the binding holds beyond
	// the size of the cache.
	for i := range gate.MaxSessions + 100 {
		if code, _ := send(g, "mallory", http.MethodPost, fmt.Sprint("random-", i)); code != http.StatusNotFound {
			t.Fatalf("random session id %d: HTTP %d", i, code)
		}
	}
	refused(g, "after a flood of random ids")

	// Restart: a new runtime on the same storage directory.
	if err := g.rt.Close(time.Second); err != nil {
		t.Fatal(err)
	}
	g, store := open()
	refused(g, "after a restart")

	// The owner's DELETE ends the session and its binding.
	if code, _ := send(g, "alice", http.MethodDelete, alice); code != http.StatusOK {
		t.Fatalf("alice's DELETE: %d", code)
	}
	if err := store.CheckSession(context.Background(), alice, "alice", 0); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("binding after the owner's DELETE: %v, want ErrNotFound", err)
	}
	if code, body := send(g, "alice", http.MethodPost, alice); code != http.StatusNotFound || body != unknownBody {
		t.Errorf("alice on her ended session: %d %s", code, body)
	}
	_ = g.rt.Close(time.Second)
}

// A request names one session or none: several Mcp-Session-Id values, a
// list in one, an empty one, or the header spelled with underscores are
// refused before anything else, so the gateway never checks one session
// while the upstream serves another.
func TestSessionHeaderAmbiguity(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	ctx := context.Background()
	if err := g.rt.Store.BindSession(ctx, "bob-session", "bob", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Store.BindSession(ctx, "alice-session", "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		values []string
		// aliases are set under header names of their own, spelled as
		// a client may send them; Go's servers hand them on canonical,
		// as Header.Add makes them.
		aliases map[string]string
		want    int
	}{
		{"own session", []string{"bob-session"}, nil, http.StatusOK},
		{"no session", nil, nil, http.StatusOK},
		{"empty first, foreign second", []string{"", "alice-session"}, nil, http.StatusBadRequest},
		{"own first, foreign second", []string{"bob-session", "alice-session"}, nil, http.StatusBadRequest},
		{"a list in one value", []string{"bob-session, alice-session"}, nil, http.StatusBadRequest},
		{"empty", []string{""}, nil, http.StatusBadRequest},
		// Read as Mcp-Session-Id by servers that map headers CGI-style.
		{"underscores, foreign", nil, map[string]string{"Mcp_Session_Id": "alice-session"}, http.StatusBadRequest},
		{"underscores beside the own session", []string{"bob-session"}, map[string]string{"mcp_session-id": "alice-session"}, http.StatusBadRequest},
		{"another header with underscores", []string{"bob-session"}, map[string]string{"X_Trace_Id": "1"}, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			for _, v := range tt.values {
				r.Header.Add(upstream.HeaderSessionID, v)
			}
			for k, v := range tt.aliases {
				r.Header.Add(k, v)
			}
			r = WithCaller(r, task.Caller{Owner: "bob", Principal: "bob"})
			up := &recordingUpstream{}
			w := httptest.NewRecorder()
			if err := g.ServeHTTP(w, r, up); err != nil {
				t.Fatal(err)
			}
			if w.Code != tt.want || (tt.want != http.StatusOK) != (len(up.bodies) == 0) {
				t.Errorf("HTTP %d, upstream got %d requests; want %d and the upstream reached only on 200", w.Code, len(up.bodies), tt.want)
			}
		})
	}
}
