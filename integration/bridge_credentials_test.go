package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An anonymous gateway (no auth, no principal) in front of a 2025-11-25
// server that authenticates callers itself, with their bearer tokens: a
// common layout. 2025-11-25 clients each open their own upstream session
// with their own token. 2026-07-28 clients go through the version bridge,
// whose upstream sessions are held per principal, and anonymous callers
// are one principal: without care, bob's call runs on the upstream session
// alice's token opened, and the upstream serves him with whatever it keeps
// of her session.

// sessionOpenerServer is a real 2025-11-25-only MCP server (go-sdk,
// stateful) that refuses requests without one of its tokens and, through
// its whoami tool, tells which token opened the session a call runs on.
type sessionOpenerServer struct {
	tokens   map[string]bool
	handler  http.Handler
	mu       sync.Mutex
	openedBy map[string]string // session id to the Authorization of its initialize
}

func newSessionOpenerServer(tokens ...string) *sessionOpenerServer {
	s := &sessionOpenerServer{tokens: map[string]bool{}, openedBy: map[string]string{}}
	for _, tok := range tokens {
		s.tokens["Bearer "+tok] = true
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "session-opener", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "who opened this session"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			s.mu.Lock()
			opener := s.openedBy[req.Session.ID()]
			s.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "opened by " + opener}}}, nil, nil
		})
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{DisableLocalhostProtection: true})
	return s
}

func (s *sessionOpenerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	if !s.tokens[auth] {
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
		// What a 2025-11-25-only server (the TypeScript SDK v1) answers a
		// sessionless 2026-07-28 request, such as the bridge's probe.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: Server not initialized"},"id":null}`))
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" { // an initialize: remember who opens the session
		w = &openerRecorder{ResponseWriter: w, s: s, auth: auth}
	}
	s.handler.ServeHTTP(w, r)
}

// openerRecorder records the session id an initialize answer names.
type openerRecorder struct {
	http.ResponseWriter
	s    *sessionOpenerServer
	auth string
	done bool
}

func (o *openerRecorder) WriteHeader(code int) {
	if !o.done {
		o.done = true
		if sid := o.Header().Get("Mcp-Session-Id"); sid != "" {
			o.s.mu.Lock()
			o.s.openedBy[sid] = o.auth
			o.s.mu.Unlock()
		}
	}
	o.ResponseWriter.WriteHeader(code)
}

func (o *openerRecorder) Write(p []byte) (int, error) {
	if !o.done {
		o.WriteHeader(http.StatusOK)
	}
	return o.ResponseWriter.Write(p)
}

func (o *openerRecorder) Flush() {
	if !o.done {
		o.WriteHeader(http.StatusOK)
	}
	if f, ok := o.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func TestBridgeKeepsUpstreamCredentialsApart(t *testing.T) {
	t.Parallel()
	const aliceToken, bobToken = "alice-upstream-token", "bob-upstream-token"
	up := newSessionOpenerServer(aliceToken, bobToken)
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimPrefix(srv.URL, "http://")}) // anonymous

	// The result of a bridged plain call is the call's result itself.
	whoamiResult := func(t *testing.T, token string) string {
		t.Helper()
		c := newBridgeClient(t, gw.URL, token, false)
		m, _, status := c.send("tools/call", map[string]any{"name": "whoami", "arguments": map[string]any{}})
		if m.Error != nil {
			t.Fatalf("whoami with %s: HTTP %d error %d %s", token, status, m.Error.Code, m.Error.Message)
		}
		return resultText(t, m.Result)
	}
	for _, call := range []struct{ token, want string }{
		{aliceToken, "opened by Bearer " + aliceToken},
		{bobToken, "opened by Bearer " + bobToken},
		{aliceToken, "opened by Bearer " + aliceToken},
	} {
		if got := strings.TrimSpace(whoamiResult(t, call.token)); got != call.want {
			t.Errorf("a 2026-07-28 call with %s ran on an upstream session %s (want: %s)", call.token, got, call.want)
		}
	}
}
