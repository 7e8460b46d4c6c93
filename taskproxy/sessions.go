package taskproxy

import (
	"container/list"
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Session binding: a 2025-11-25 session belongs to the owner whose
// initialize answer carried its Mcp-Session-Id, and to no one else. The
// binding is written to the store before that answer leaves (so the
// client's first use finds it, also after a restart), and every request that
// names a session is checked against it, whatever its method and version
// header. A session that is not bound to the caller, whether it belongs to
// another owner or was never seen, gets the same 404 "Session not found", so
// existence never leaks and the upstream never sees the request.

const (
	// maxSessions bounds the cache of bindings. It holds only bindings the
	// store confirmed, so evicting one costs a store read, never a wrong
	// answer, and unknown ids never enter it.
	maxSessions = 1 << 16
	// sessionIdleTTL is how long a binding lives without use.
	sessionIdleTTL = 24 * time.Hour
	// sessionRefresh is how often a session in use has its binding's ttl
	// extended: at most one store write per session per interval.
	sessionRefresh = 5 * time.Minute
)

// sessionTable caches confirmed bindings: session id to owner, with the
// time the stored binding's ttl was last extended. It is bounded; the least
// recently used entries go first.
type sessionTable struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*list.Element
	order *list.List // front: most recently used
}

type sessionEntry struct {
	id, owner string
	refreshed time.Time
}

func newSessionTable(max int) *sessionTable {
	return &sessionTable{max: max, byID: map[string]*list.Element{}, order: list.New()}
}

// lookup returns the cached binding of id.
func (s *sessionTable) lookup(id string) (owner string, refreshed time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return "", time.Time{}, false
	}
	s.order.MoveToFront(e)
	entry := e.Value.(*sessionEntry)
	return entry.owner, entry.refreshed, true
}

// remember caches a binding the store confirmed.
func (s *sessionTable) remember(id, owner string, refreshed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.MoveToFront(e)
		*e.Value.(*sessionEntry) = sessionEntry{id: id, owner: owner, refreshed: refreshed}
		return
	}
	s.byID[id] = s.order.PushFront(&sessionEntry{id: id, owner: owner, refreshed: refreshed})
	if s.order.Len() > s.max {
		oldest := s.order.Back()
		s.order.Remove(oldest)
		delete(s.byID, oldest.Value.(*sessionEntry).id)
	}
}

func (s *sessionTable) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.Remove(e)
		delete(s.byID, id)
	}
}

// guardSession answers 404, as for an unknown session, when r names a
// session that is not bound to owner. It reports whether r may go on.
func (g *Gateway) guardSession(w http.ResponseWriter, r *http.Request, owner string) bool {
	// One session per request: with several values (or a list in one),
	// the gateway would check one and an upstream that reads another would
	// serve a session nobody checked.
	if vals := r.Header.Values(upstream.HeaderSessionID); len(vals) > 1 || len(vals) == 1 && strings.Contains(vals[0], ",") {
		writeJSONError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "a request names at most one session (one Mcp-Session-Id header)"))
		return false
	}
	if sessionHeaderAlias(r.Header) {
		writeJSONError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the session header is spelled Mcp-Session-Id (with hyphens)"))
		return false
	}
	sid := r.Header.Get(upstream.HeaderSessionID)
	if sid == "" {
		if _, present := r.Header[upstream.HeaderSessionID]; present {
			writeJSONError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "an empty Mcp-Session-Id header names no session"))
			return false
		}
		return true
	}
	err := g.checkSession(r.Context(), sid, owner)
	switch {
	case err == nil:
		return true
	case errors.Is(err, task.ErrNotFound):
		if errors.Is(err, task.ErrForeign) {
			g.audit(auditDenied, "", nil, CallerOf(r.Context()))
		}
		writeJSONError(w, http.StatusNotFound, nil, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
	default:
		g.log.Error("checking a session binding", zap.Error(err))
		writeJSONError(w, http.StatusServiceUnavailable, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the session could not be checked; retry later"))
	}
	return false
}

// sessionHeaderAlias reports whether h has a header that reads as
// Mcp-Session-Id once underscores are taken for hyphens (Mcp_Session_Id):
// servers behind CGI-style header mapping (WSGI, PHP, some proxies) read it
// as the session header, which the gateway would not have checked.
func sessionHeaderAlias(h http.Header) bool {
	for k := range h {
		if len(k) == len(upstream.HeaderSessionID) && strings.IndexByte(k, '_') >= 0 && strings.EqualFold(strings.ReplaceAll(k, "_", "-"), upstream.HeaderSessionID) {
			return true
		}
	}
	return false
}

// checkSession confirms that sid is bound to owner: from the cache while
// its last refresh is recent, otherwise from the store, extending the
// binding's ttl there.
func (g *Gateway) checkSession(ctx context.Context, sid, owner string) error {
	now := clock()
	if cached, refreshed, ok := g.rt.sessions.lookup(sid); ok && cached == owner && now.Sub(refreshed) < sessionRefresh {
		return nil
	}
	if err := g.rt.Store.CheckSession(ctx, sid, owner, sessionIdleTTL); err != nil {
		return err
	}
	g.rt.sessions.remember(sid, owner, now)
	return nil
}

// bindingWriter binds the session its initialize answer names to owner,
// in the store, before the answer's head goes out. If the binding cannot be
// stored the session id is withheld from the client (which then has no
// session to use), so an unbound session is never handed out.
type bindingWriter struct {
	http.ResponseWriter
	g     *Gateway
	ctx   context.Context
	owner string
	done  bool
}

func (g *Gateway) bindSessionOf(ctx context.Context, w http.ResponseWriter, owner string) *bindingWriter {
	return &bindingWriter{ResponseWriter: w, g: g, ctx: ctx, owner: owner}
}

func (b *bindingWriter) bind(code int) {
	b.done = true
	sid := b.Header().Get(upstream.HeaderSessionID)
	if sid == "" || code < 200 || code > 299 {
		return
	}
	if err := b.g.rt.Store.BindSession(b.ctx, sid, b.owner, sessionIdleTTL); err != nil {
		b.g.log.Error("binding a new session to its principal; the session id is withheld from the client", zap.Error(err))
		b.Header().Del(upstream.HeaderSessionID)
		return
	}
	b.g.rt.sessions.remember(sid, b.owner, clock())
}

func (b *bindingWriter) WriteHeader(code int) {
	if !b.done && code >= 200 {
		b.bind(code)
	}
	b.ResponseWriter.WriteHeader(code)
}

func (b *bindingWriter) Write(p []byte) (int, error) {
	if !b.done {
		b.WriteHeader(http.StatusOK)
	}
	return b.ResponseWriter.Write(p)
}

// Flush sends the head first, bound.
func (b *bindingWriter) Flush() {
	if !b.done {
		b.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(b.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (b *bindingWriter) Unwrap() http.ResponseWriter { return b.ResponseWriter }

// serveSessionDelete passes the owner's DELETE of a session on (guardSession
// has checked the owner), and forgets the binding once the upstream ended
// the session or no longer knows it.
func (g *Gateway) serveSessionDelete(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	sid := r.Header.Get(upstream.HeaderSessionID)
	sw := &deleteStatusWriter{ResponseWriter: w}
	err := upstream.ServeNext(next, sw, r)
	if err == nil && (sw.status >= 200 && sw.status <= 299 || sw.status == http.StatusNotFound) {
		g.rt.sessions.forget(sid)
		if ferr := g.rt.Store.ForgetSession(context.WithoutCancel(r.Context()), sid); ferr != nil {
			g.log.Warn("forgetting an ended session; it expires when idle", zap.Error(ferr))
		}
	}
	return err
}

// deleteStatusWriter records the status of the upstream's answer.
type deleteStatusWriter struct {
	http.ResponseWriter
	status int
}

func (d *deleteStatusWriter) WriteHeader(code int) {
	if d.status == 0 && code >= 200 {
		d.status = code
	}
	d.ResponseWriter.WriteHeader(code)
}

func (d *deleteStatusWriter) Write(p []byte) (int, error) {
	if d.status == 0 {
		d.status = http.StatusOK
	}
	return d.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (d *deleteStatusWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }
