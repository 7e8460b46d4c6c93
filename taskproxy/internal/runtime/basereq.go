package runtime

import (
	"context"
	"sync"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A recovered task is re-run through the next handler of a request its
// route served (routeBase), since only a request carries what that handler
// needs (the server's request state, the handler chain after the
// gateway's). Rather than wait for a client to send one, which after a
// restart at a quiet hour may be never, the runtime asks the glue for a
// request of its own through the route (RouteConfig.RequestBase) as soon
// as a task waits.

// baseRequests asks the glue for a route's base, one request at a time and
// once per endpoint, until one reaches the route: the tasks recovered
// together share that request.
type baseRequests struct {
	mu    sync.Mutex
	tried map[string]bool // host and endpoint of the requests made
}

// ask has route's glue send a request to t's endpoint, unless ready is
// closed (a request was served since) or one went there already. A route
// whose configuration has not started (found while it is provisioned)
// asks nothing: its server may not be ready to serve.
func (br *baseRequests) ask(ctx context.Context, route *Route, t *task.Task, ready <-chan struct{}) {
	if route.cfg.RequestBase == nil || t.Endpoint == "" || !route.Started() {
		return
	}
	br.mu.Lock()
	defer br.mu.Unlock()
	select {
	case <-ready:
		return
	default:
	}
	key := t.Host + " " + entryURI(t)
	if br.tried[key] {
		return
	}
	if br.tried == nil {
		br.tried = map[string]bool{}
	}
	br.tried[key] = true
	route.cfg.RequestBase(ctx, t)
}

// entryURI is where a request reaches t's route: the URI its call arrived
// with at the server, else its endpoint.
func entryURI(t *task.Task) string {
	if t.EntryURI != "" {
		return t.EntryURI
	}
	return t.Endpoint
}
