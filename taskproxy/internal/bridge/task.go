package bridge

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Bridged calls of a tool the upstream runs as a task itself
// ([wire.ToolPolicy.UpstreamRunsTask]): a 2026-07-28 client calling it through the version
// bridge gets the gateway's task at once, and the task's worker creates the
// upstream's task with params.task and follows it, all on
// the principal's 2025-11-25 upstream session with 2025-11-25 headers. The
// upstream's input requests become the task's inputRequests, answered with
// tasks/update; tasks/cancel becomes the upstream's tasks/cancel; the
// outcome gets the 2026-07-28 fields as any bridged result. The task record
// keeps the upstream session id and the 2025-11-25 headers, so that a
// restarted gateway follows the upstream's task again on that session,
// which lives in the upstream, not in the gateway's session table.

// bridgeHeaders sets a request the bridge sends upstream on session s:
// its session id and protocol version, without the 2026-07-28 routing
// headers.
func bridgeHeaders(h http.Header, s *bridgeSession) {
	h.Del(upstream.HeaderMethod)
	h.Del(upstream.HeaderName)
	if s.id != "" {
		h.Set(upstream.HeaderSessionID, s.id)
	} else {
		h.Del(upstream.HeaderSessionID)
	}
	h.Set(upstream.HeaderProtocolVersion, s.version)
}

// bridgedRunsUpstreamTask reports, for a bridged tools/call of name on
// session s, whether the upstream runs the tool as a task of its own. The
// upstream's tools/list is fetched on s first when the tool was not seen
// yet (ToolPolicy.LearnToolsFor says when).
func (c *call) bridgedRunsUpstreamTask(s *bridgeSession, name string) bool {
	if _, known := c.Tools.Caps.ToolMode(name); !known {
		base := c.Detach(c.R)
		bridgeHeaders(base.Header, s)
		c.Tools.LearnToolsFor(c.R.Context(), base, c.Next, name, true) // the call may become the upstream's task
	}
	return c.Tools.UpstreamRunsTask(name)
}

// serveBridgedUpstreamTask makes the gateway's task of a bridged call of a
// tool the upstream runs as a task, and starts following it upstream on
// session s (held by the caller until this returns; the task holds it
// itself for as long as it runs).
func (c *call) serveBridgedUpstreamTask(s *bridgeSession, name string) error {
	if c.Limited() {
		return nil
	}
	if e := c.CheckQuota(); e != nil {
		c.fail(e)
		return nil
	}
	t := c.NewTask(task.Era2026, name, translate.V2025Params(c.Msg.Params), c.DefaultTTL)
	t.UpstreamTask, t.Session = true, s.id
	// What a follow after a restart sends: the session's version, and no
	// 2026-07-28 routing headers (they name this request, not the follow's).
	for k := range t.Headers {
		if upstream.IsRoutingHeader(k) {
			delete(t.Headers, k)
		}
	}
	t.Headers[upstream.HeaderProtocolVersion] = s.version
	if !c.StoreTask(t, func(t *task.Task) any { return v2026.CreateResult(t) }, c.fail) {
		return nil
	}
	base := c.Detach(c.R)
	bridgeHeaders(base.Header, s)
	run := c.Route.NewRun(base, c.Next)
	// Before the call, which carries the run span's traceparent.
	runtime.TraceRun(c.Route, t, run)
	body, err := follow.UpstreamCallBody(t) // t.UpstreamTask: with params.task
	if err != nil {
		run.Release()
		c.Route.Finish(t, nil, rpcerr.InternalError(c.Log, "encoding the upstream call", err, zap.String("task", t.ID)))
		return c.Reply(v2026.CreateResult(t))
	}
	// The session stays held while the task runs: the table must not end
	// it under the follow.
	s.hold()
	context.AfterFunc(run.Ctx, s.release)
	c.Route.StartWorker(t, run, upstream.StartAttempt(run.Ctx, run.Base, run.Next, t.UpstreamID, body), nil)
	return c.Reply(v2026.CreateResult(t))
}

// hold takes one more reference to s, which the caller holds already.
func (s *bridgeSession) hold() {
	s.table.mu.Lock()
	s.refs++
	s.table.mu.Unlock()
}

// SessionLost reports whether ev, the answer to a bridged task's
// creating call, says the upstream no longer knows the task's session (as
// bridgedCall.sessionLost reads it); the session then leaves the table, so
// that the caller's next request opens a new one.
func (b *Bridge) SessionLost(t *task.Task, ev *upstream.Event) bool {
	if t.Era != task.Era2026 || t.Session == "" || !upstream.SessionLost(*ev) {
		return false
	}
	b.sessions.dropID(t.Session)
	b.Log.Info("version bridge: the upstream dropped a session; re-initializing at the next call", zap.String("task", t.ID), zap.String("upstream_session", t.Session))
	return true
}

// dropID forgets the sessions with upstream id id (see drop).
func (t *bridgeSessions) dropID(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.byKey {
		if s.id == id && isClosed(s.ready) {
			t.deleteLocked(s)
		}
	}
}
