package runtime

import (
	"context"
	"net/http"
	"net/url"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The requests a task's upstream call is made of (its attempts, answers to
// the upstream's requests, cancellations) go to the task's endpoint with
// the headers its call speaks. A replica without the task's worker (the
// answer landed on another replica, or came before a restarted gateway
// resumed the task) builds them from the task record as the worker would
// send them, whatever wire the client used to ask.

// TaskUpstreamBase returns the base of a request about t sent upstream
// from r, a request of t's owner on this replica: r's headers (its
// authentication, as the worker's requests carry their caller's) with the
// call's protocol headers (taskCallHeaders), sent to t's endpoint and host.
func TaskUpstreamBase(ctx context.Context, r *http.Request, t *task.Task) *http.Request {
	base := r.Clone(ctx)
	TaskCallHeaders(base.Header, t)
	taskEndpoint(base, t)
	return base
}

// TaskCallHeaders sets h to the protocol headers of t's upstream call. A
// call on a 2025-11-25 session (a 2025-11-25 task's, a bridged task's) is
// made on the task's session with the version it negotiated, as recorded
// with the task, and without the 2026-07-28 routing headers, which name
// the request they came with, not the call.
func TaskCallHeaders(h http.Header, t *task.Task) {
	if !UpstreamSpeaksV2025(t) {
		return
	}
	for k := range h {
		if upstream.IsRoutingHeader(k) {
			delete(h, k)
		}
	}
	switch v := t.Headers[upstream.HeaderProtocolVersion]; {
	case v != "" && v != string(task.Era2026):
		h.Set(upstream.HeaderProtocolVersion, v)
	case t.Era == task.Era2026:
		// Bridged, recorded before the session's version was.
		h.Set(upstream.HeaderProtocolVersion, string(task.Era2025))
	default: // the call carried none
		h.Del(upstream.HeaderProtocolVersion)
	}
	if t.Session != "" {
		h.Set(upstream.HeaderSessionID, t.Session)
	} else {
		h.Del(upstream.HeaderSessionID)
	}
}

// taskEndpoint points base at t's endpoint and host, where its call went.
func taskEndpoint(base *http.Request, t *task.Task) {
	if t.Host != "" {
		base.Host = t.Host
	}
	if u, err := url.ParseRequestURI(t.Endpoint); err == nil {
		base.URL.Path, base.URL.RawPath, base.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
	}
}
