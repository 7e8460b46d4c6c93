package wire

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
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

// SessionGuard binds 2025-11-25 sessions to owners and checks them: the
// store holds the bindings, the runtime's session table caches them.
type SessionGuard struct {
	// rt's store holds the bindings; it is read at each use, since a
	// runtime opens its store only when a configuration starts.
	rt    *runtime.Runtime
	table *gate.SessionTable
	log   *zap.Logger
	route *runtime.Route // the audit log of denials
}

// NewSessionGuard returns the guard of the bindings in rt's store, cached
// in table; route's audit log records denials.
func NewSessionGuard(rt *runtime.Runtime, table *gate.SessionTable, log *zap.Logger, route *runtime.Route) *SessionGuard {
	return &SessionGuard{rt: rt, table: table, log: log, route: route}
}

// binder is the store of the bindings.
func (sg *SessionGuard) binder() task.SessionBinder { return sg.rt.Store }

// Guard answers 404, as for an unknown session, when r names a
// session that is not bound to owner. It reports whether r may go on.
func (sg *SessionGuard) Guard(w http.ResponseWriter, r *http.Request, owner string) bool {
	// One session per request: with several values (or a list in one),
	// the gateway would check one and an upstream that reads another would
	// serve a session nobody checked.
	vals, present := r.Header[upstream.HeaderSessionID] // read once: every request passes here
	if len(vals) > 1 || len(vals) == 1 && strings.Contains(vals[0], ",") {
		WriteError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "a request names at most one session (one Mcp-Session-Id header)"))
		return false
	}
	if gate.SessionHeaderAlias(r.Header) {
		WriteError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "the session header is spelled Mcp-Session-Id (with hyphens)"))
		return false
	}
	var sid string
	if len(vals) == 1 {
		sid = vals[0]
	}
	if sid == "" {
		if present {
			WriteError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "an empty Mcp-Session-Id header names no session"))
			return false
		}
		return true
	}
	err := sg.check(r.Context(), sid, owner)
	switch {
	case err == nil:
		return true
	case errors.Is(err, task.ErrNotFound):
		if errors.Is(err, task.ErrForeign) {
			sg.route.Audit(runtime.AuditDenied, "", nil, task.CallerOf(r.Context()))
		}
		WriteError(w, http.StatusNotFound, nil, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
	default:
		sg.log.Error("checking a session binding", zap.Error(err))
		WriteError(w, http.StatusServiceUnavailable, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the session could not be checked; retry later"))
	}
	return false
}

// check confirms that sid is bound to owner: from the cache while
// its last refresh is recent, otherwise from the store, extending the
// binding's ttl there.
func (sg *SessionGuard) check(ctx context.Context, sid, owner string) error {
	now := runtime.Now()
	if cached, refreshed, ok := sg.table.Lookup(sid); ok && cached == owner && now.Sub(refreshed) < gate.SessionRefresh {
		return nil
	}
	since := sg.table.Forgets()
	if err := sg.binder().CheckSession(ctx, sid, owner, gate.SessionIdleTTL); err != nil {
		return err
	}
	sg.table.Remember(sid, owner, now, since)
	return nil
}

// bindingWriter binds the session its initialize answer names to owner,
// in the store, before the answer's head goes out. If the binding cannot be
// stored the session id is withheld from the client (which then has no
// session to use), so an unbound session is never handed out.
type bindingWriter struct {
	http.ResponseWriter
	sg    *SessionGuard
	ctx   context.Context
	owner string
	done  bool
}

// BindOf returns w binding the session its answer names to owner.
func (sg *SessionGuard) BindOf(ctx context.Context, w http.ResponseWriter, owner string) *bindingWriter {
	return &bindingWriter{ResponseWriter: w, sg: sg, ctx: ctx, owner: owner}
}

func (b *bindingWriter) bind(code int) {
	b.done = true
	sid := b.Header().Get(upstream.HeaderSessionID)
	if sid == "" || code < 200 || code > 299 {
		return
	}
	if err := b.sg.binder().BindSession(b.ctx, sid, b.owner, gate.SessionIdleTTL); err != nil {
		b.sg.log.Error("binding a new session to its principal; the session id is withheld from the client", zap.Error(err))
		b.Header().Del(upstream.HeaderSessionID)
		return
	}
	b.sg.table.Remember(sid, b.owner, runtime.Now(), b.sg.table.Forgets()) // a new session: nothing forgot it
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

// Bind binds sid, a session the gateway itself opened for a client (the
// reverse version bridge's), to owner, in the store and the cache, as an
// upstream's session is bound at its initialize answer.
func (sg *SessionGuard) Bind(ctx context.Context, sid, owner string) error {
	since := sg.table.Forgets()
	if err := sg.binder().BindSession(ctx, sid, owner, gate.SessionIdleTTL); err != nil {
		return fmt.Errorf("binding session to its principal: %w", err)
	}
	sg.table.Remember(sid, owner, runtime.Now(), since)
	return nil
}

// Forget ends the binding of sid (Guard has checked its owner): its next
// use gets 404.
func (sg *SessionGuard) Forget(ctx context.Context, sid string) error {
	sg.table.Forget(sid)
	if err := sg.binder().ForgetSession(ctx, sid); err != nil {
		return fmt.Errorf("forgetting session: %w", err)
	}
	return nil
}

// ServeDelete passes the owner's DELETE of a session on (guardSession
// has checked the owner), and forgets the binding once the upstream ended
// the session or no longer knows it.
func (sg *SessionGuard) ServeDelete(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	sid := r.Header.Get(upstream.HeaderSessionID)
	sw := &deleteStatusWriter{ResponseWriter: w}
	err := upstream.ServeNext(next, sw, r)
	if err == nil && (sw.status >= 200 && sw.status <= 299 || sw.status == http.StatusNotFound) {
		sg.table.Forget(sid)
		if ferr := sg.binder().ForgetSession(context.WithoutCancel(r.Context()), sid); ferr != nil {
			sg.log.Warn("forgetting an ended session; it expires when idle", zap.Error(ferr))
		}
	}
	return err
}

// Lost ends the client's session of t, a 2025-11-25 task, when ev, the
// final answer to its upstream call, says the upstream no longer knows the
// session (it restarted, or ended the session): the binding is forgotten,
// so the client's next request naming the session gets 404 and the client
// starts a new session, as the transport specifies, instead of making
// task after task in a session whose calls can only fail. It reports
// whether it did.
func (sg *SessionGuard) Lost(t *task.Task, ev *upstream.Event) bool {
	if t.Era != task.Era2025 || t.Session == "" || ev == nil || !upstream.SessionLost(*ev) {
		return false
	}
	sg.table.Forget(t.Session)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sg.binder().ForgetSession(ctx, t.Session); err != nil {
		// Still ended here; another replica may accept the session until
		// its binding expires when idle.
		sg.log.Warn("forgetting a session the upstream lost; it expires when idle", zap.String("task", t.ID), zap.Error(err))
	}
	sg.log.Info("the upstream lost a client's session; the gateway ended it too", zap.String("task", t.ID), zap.String("owner", t.Owner))
	return true
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
