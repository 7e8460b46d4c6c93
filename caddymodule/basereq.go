package caddymodule

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A task recovered after a restart, or taken over from a replica that
// stopped, is re-run through the handler that follows mcp_tasks in its
// route (normally reverse_proxy). Caddy hands a middleware its next
// handler only with a request, inside ServeHTTP: the chain is compiled
// per route and not reachable from Provision. And the handlers after
// mcp_tasks need what Caddy's server puts on a request (the replacer and
// its placeholders, the vars, the server, the route groups). So rather
// than fake that state, the gateway asks its own server to serve a request
// of its own: the server's ServeHTTP, in process, with a request to the
// task's endpoint and host, which therefore passes the same site, matchers
// and handlers as the request that created the task. When it reaches this
// mcp_tasks handler (a context value no client can set says it is the
// gateway's), the handler hands it and its next handler to the core as the
// route's base and answers 204, sending nothing on. A loopback request to
// Caddy's own listener would do the same through a socket, with TLS and
// listener addresses to get right and a request anyone could imitate.
//
// What does not reach the handler leaves the task waiting for a client's
// request to the route, as before: a handler before mcp_tasks that refuses
// it (basic_auth, say; a plain request carries no credentials), a matcher
// on TLS or one that excludes its client address (127.0.0.1: a matcher that
// admits loopback admits it too), or a rewrite before mcp_tasks that
// the rewritten path does not pass again. Its body is an MCP ping, so that
// should it reach an upstream MCP server some other way it asks nothing.

// baseRequestKey marks the gateway's own request in its context.
type baseRequestKey struct{}

// baseRequest is the mark: the route it is for, taken by the first
// mcp_tasks handler it reaches, and whether that was the route's.
type baseRequest struct {
	route   string
	taken   atomic.Bool
	reached atomic.Bool
}

// baseRequestBody is the body of the gateway's own request: a ping.
const baseRequestBody = `{"jsonrpc":"2.0","id":"mcp-tasks-base","method":"ping"}`

// requestBase has the server serve the gateway's own request to t's
// endpoint and host (taskproxy.Config.RequestBase).
func (h *Handler) requestBase(ctx context.Context, t *task.Task) {
	select {
	case <-h.stopping: // the configuration stops: its server serves no more
		return
	default:
	}
	if h.server == nil {
		return
	}
	br := &baseRequest{route: h.route}
	ctx = context.WithValue(ctx, baseRequestKey{}, br)
	host := t.Host
	if lns := h.server.Listeners(); len(lns) > 0 {
		// The address it came in on, as a request's: a re-run names it
		// as its client address (detachRequest).
		ctx = context.WithValue(ctx, http.LocalAddrContextKey, lns[0].Addr())
		if host == "" { // a task recorded without one
			host = lns[0].Addr().String()
		}
	}
	// The URI the task's call arrived with, before the server's rewrites
	// (handle_path's strip): the same rewrites lead this request to the
	// route.
	uri := t.Endpoint
	if t.EntryURI != "" {
		uri = t.EntryURI
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, uri, strings.NewReader(baseRequestBody))
	if err != nil {
		h.logger.Warn("a recovered task waits for a client's request to its route: its endpoint is not a request path",
			zap.String("task", t.ID), zap.String("endpoint", uri), zap.Error(err))
		return
	}
	r.Host, r.RequestURI = host, uri
	// The gateway originates it, in this process.
	r.RemoteAddr = "127.0.0.1:0"
	for k, v := range t.Headers { // the MCP protocol and routing headers of its call
		r.Header.Set(k, v)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	h.server.ServeHTTP(&discardResponse{header: http.Header{}}, r)
	if !br.reached.Load() && ctx.Err() == nil {
		h.logger.Warn("a recovered task waits for a client's request to its route: the gateway's own request to the task's endpoint did not reach the route",
			zap.String("task", t.ID), zap.String("host", t.Host), zap.String("endpoint", uri))
	}
}

// serveBase hands the gateway's own request, which reached this handler,
// to the core as the base of its route, if it is this route's.
func (h *Handler) serveBase(w http.ResponseWriter, r *http.Request, next http.Handler, br *baseRequest) {
	if br.route == h.route {
		h.gw.ServeBase(r, next)
		br.reached.Store(true)
	}
	w.WriteHeader(http.StatusNoContent)
}

// baseRequestOf returns the mark of the gateway's own request that no
// mcp_tasks handler took yet, taking it; nil for any other request.
func baseRequestOf(r *http.Request) *baseRequest {
	br, ok := r.Context().Value(baseRequestKey{}).(*baseRequest)
	if !ok || !br.taken.CompareAndSwap(false, true) {
		return nil
	}
	return br
}

// discardResponse takes the answer to the gateway's own request.
type discardResponse struct{ header http.Header }

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardResponse) WriteHeader(int)             {}

// EnableFullDuplex lets a server configured for full duplex serve it
// without a warning: nothing is written while the body is read.
func (d *discardResponse) EnableFullDuplex() error { return nil }

// entryURI is the request URI r arrived with at Caddy's server, before
// handle_path, uri or rewrite changed it (taskproxy.Config.EntryURI).
func entryURI(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.RequestURI()
	}
	return ""
}
