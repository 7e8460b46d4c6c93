package v2025on2026

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// SessionPrefix starts the id of every session the reverse bridge opens:
// a request naming one is the bridge's whatever the probe says now.
const SessionPrefix = "mcp-tasks-v2026."

// Bridge is a configuration's reverse version bridge.
type Bridge struct {
	// Env is the configuration's (its policy, loggers, session guard,
	// probes).
	*wire.Env
	// passed remembers the endpoints where a passed-on initialize opened
	// a 2025-11-25 session ([passedInitializes]).
	passed *passedInitializes
	// inflight holds the cancel of each call in flight on a session, by
	// session and request id, for the client's notifications/cancelled.
	inflight sync.Map
	// rounds holds the input rounds waiting for a client's answers, by
	// name ([inputRound]).
	rounds sync.Map
}

// New returns the reverse bridge of the configuration env.
func New(env *wire.Env) *Bridge {
	return &Bridge{Env: env, passed: newPassedInitializes()}
}

// Owns reports whether r names a session the reverse bridge opened.
func Owns(r *http.Request) bool {
	return strings.HasPrefix(gate.Header(r.Header, upstream.HeaderSessionID), SessionPrefix)
}

// SessionVersion is the protocol version of every session the reverse
// bridge opens: its initialize answers with it whatever the client asked.
const SessionVersion = "2025-11-25"

// RefuseVersion answers HTTP 400 to r, a request naming one of the
// bridge's sessions (Owns), when its MCP-Protocol-Version header names
// another version than the session's, as a 2025-11-25 server answers a
// version it does not serve; it reports whether it did. A request without
// the header is taken as the session's version (it was negotiated).
func RefuseVersion(w http.ResponseWriter, r *http.Request) bool {
	got := r.Header.Values(upstream.HeaderProtocolVersion)
	if len(got) == 0 || len(got) == 1 && got[0] == SessionVersion {
		return false
	}
	e := jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Bad Request: unsupported MCP-Protocol-Version %q: this session speaks %s", strings.Join(got, ", "), SessionVersion)
	e.Data, _ = json.Marshal(map[string]any{"supported": []string{SessionVersion}, "requested": strings.Join(got, ", ")})
	wire.WriteError(w, http.StatusBadRequest, nil, e)
	return true
}

// Applies reports whether x, a 2025-11-25 POST, is the reverse bridge's
// (see the package doc): it names one of its sessions, or it names none
// and the endpoint speaks only 2026-07-28 (probed for an initialize, a
// kept verdict for anything else). An initialize it passes on is watched
// (x.W wrapped, [passedInitializes]): once one opens a 2025-11-25 session upstream,
// the next ones there pass on without a probe.
func (b *Bridge) Applies(x *wire.Exchange) bool {
	if x.Msg.IsResponse() {
		if _, _, ok := jsonrpc.ParseInputID(x.Msg.ID); ok {
			return false // an answer to a task's input request: the 2025-11-25 adapter's, as for any task
		}
	}
	// Owns, and whether another session is named, from one read of the
	// header.
	switch sid := gate.Header(x.R.Header, upstream.HeaderSessionID); {
	case strings.HasPrefix(sid, SessionPrefix):
		return true
	case sid != "":
		return false
	}
	if x.Msg.IsRequest() && x.Msg.Method == "initialize" {
		endpoint := wire.Endpoint(x.R)
		if b.passed.recent(endpoint) {
			return false // the upstream opened a 2025-11-25 session lately ([passedInitializes])
		}
		if v, known := b.Probes.Verdict(x.R, x.Next); known && v.V2026Only {
			return true
		}
		x.W = b.passed.watch(x.W, endpoint) // passed on: watched ([passedInitializes])
		return false
	}
	v, ok := b.Probes.Cached(x.R)
	return ok && v.V2026Only
}

// ServeOther answers a request of another HTTP method than POST naming one
// of the bridge's sessions (Owns; the session guard has checked its
// owner): DELETE ends the session, anything else (the GET stream) is 405,
// since the upstream sends nothing outside a request.
func (b *Bridge) ServeOther(x *wire.Exchange) error {
	if !x.GuardOrigin() {
		return nil
	}
	if x.R.Method != http.MethodDelete {
		x.W.Header().Set("Allow", "POST, DELETE")
		wire.WriteError(x.W, http.StatusMethodNotAllowed, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest,
			"Method Not Allowed: this server sends nothing outside a request, so it offers no GET stream"))
		return nil
	}
	sid := x.R.Header.Get(upstream.HeaderSessionID)
	if err := b.Sessions.Forget(context.WithoutCancel(x.R.Context()), sid); err != nil {
		b.Log.Warn("forgetting an ended session; it expires when idle", zap.Error(err))
	}
	x.W.WriteHeader(http.StatusNoContent)
	return nil
}

// call is one 2025-11-25 request the reverse bridge answers.
type call struct {
	*wire.Exchange
	b *Bridge
	// sid is the session the request names ("" for none).
	sid string
}

// Serve answers x, a 2025-11-25 POST that Applies.
func (b *Bridge) Serve(x *wire.Exchange) error {
	c := &call{Exchange: x, b: b, sid: x.R.Header.Get(upstream.HeaderSessionID)}
	if !c.GuardOrigin() {
		return nil
	}
	switch {
	case c.Msg.IsNotification():
		if c.Msg.Method == "notifications/cancelled" {
			c.cancelled()
		}
		c.W.WriteHeader(http.StatusAccepted) // initialized, cancelled, roots/list_changed: nothing goes upstream
		return nil
	case !c.Msg.IsRequest():
		// A response: to an input request of the bridge's ([inputRound]), or
		// to nothing the bridge asked; either way accepted.
		c.serveInputAnswer()
		c.W.WriteHeader(http.StatusAccepted)
		return nil
	}
	switch c.Msg.Method {
	case "initialize":
		return c.initialize()
	case "ping":
		return c.Reply(struct{}{})
	case "logging/setLevel":
		return c.setLevel()
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		return v2025.Serve(c.Exchange) // the gateway's tasks, from the store, as for any 2025-11-25 client
	case "tasks/update", "subscriptions/listen", "server/discover":
		// 2026-07-28 methods: not 2025-11-25's, and on the upstream they
		// would reach its tasks and streams past the gateway.
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s is not a 2025-11-25 method", c.Msg.Method))
		return nil
	case "tools/call":
		return c.serveToolsCall()
	}
	return c.forward()
}

// initialize opens a session: the upstream's server/discover, asked with
// the caller's headers, answers it in 2025-11-25 form; the session id is
// bound to the caller's owner before the answer names it.
func (c *call) initialize() error {
	if c.Limited() { // a session costs a binding and a stored client description
		return nil
	}
	var p struct {
		Capabilities json.RawMessage `json:"capabilities"`
		ClientInfo   json.RawMessage `json:"clientInfo"`
	}
	if err := json.Unmarshal(c.Msg.Params, &p); err != nil {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return nil
	}
	meta := translate.RequestMeta{Capabilities: translate.V2026ClientCapabilities(p.Capabilities), ClientInfo: p.ClientInfo}
	params, err := translate.V2026Params(nil, meta)
	if err != nil {
		c.Fail(rpcerr.InternalError(c.Log, "building server/discover", err))
		return nil
	}
	rep := newReply(c.Exchange)
	ev := c.attempt(c.R.Context(), c.upstreamBase("server/discover", nil), "server/discover", params, rep)
	if c.R.Context().Err() != nil {
		return nil
	}
	if ev.Err != nil || ev.Final.Error != nil || rep.refused(ev) {
		c.sendFinal(rep, ev)
		return nil
	}
	result, err := translate.V2025Initialize(ev.Final.Result)
	if err != nil {
		c.Fail(rpcerr.UpstreamFailure(c.Log, err))
		return nil
	}
	sid := SessionPrefix + task.NewTaskID()
	err = c.Sessions.Bind(c.R.Context(), sid, c.Owner)
	if err == nil {
		err = c.descriptions().save(c.R.Context(), sid, c.Owner, meta)
	}
	if err != nil {
		e := rpcerr.InternalError(c.Log, "opening a session", err)
		wire.WriteError(c.W, wire.AnswerStatus(c.W, http.StatusInternalServerError, e), c.Msg.ID, e)
		return nil
	}
	if result, err = jsonx.SetPath(result, []string{"capabilities", "tasks"}, c.Tools.V2025TasksCapability()); err != nil {
		c.Fail(rpcerr.InternalError(c.Log, "declaring the tasks capability", err))
		return nil
	}
	c.W.Header().Set(upstream.HeaderSessionID, sid)
	c.ReplyRaw(result)
	return nil
}

// setLevel keeps the session's log level: 2026-07-28 asks for log
// messages per request, which the bridge does on each of the session's
// requests from now on.
func (c *call) setLevel() error {
	level, err := wire.StringParam(c.Msg.Params, "level")
	if err != nil {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return nil
	}
	if c.sid != "" {
		meta, ok := c.requestMeta()
		if !ok {
			return nil
		}
		meta.LogLevel = level
		if err := c.descriptions().save(c.R.Context(), c.sid, c.Owner, meta); err != nil {
			c.failDescription(err)
			return nil
		}
	}
	return c.Reply(struct{}{})
}

// cancelled cancels the session's call the notification names: on
// 2026-07-28, closing the upstream stream is the cancellation.
func (c *call) cancelled() {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if c.sid == "" || json.Unmarshal(c.Msg.Params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	if entry, ok := c.b.inflight.Load(inflightKey(c.sid, p.RequestID)); ok {
		entry.(*inflightCall).cancel(errCancelledByClient)
	}
}

// inflightCall is a call in flight on a session.
type inflightCall struct{ cancel context.CancelCauseFunc }

// inflightKey keys a call in flight on a session.
func inflightKey(sid string, id json.RawMessage) string { return sid + "\x00" + string(id) }
