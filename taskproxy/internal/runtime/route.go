package runtime

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// RouteConfig is the policy of one route (a handler instance of a site)
// that the runtime applies to the route's tasks, whichever configuration
// serves it: how a worker's request is detached, what a result may weigh,
// which tools run again after a restart, where logs go, and the hooks a
// protocol adapter sets.
type RouteConfig struct {
	// Name identifies the route stably across restarts (Config.Route).
	Name string
	// Detach copies a request for a worker (Config.Detach).
	Detach func(r *http.Request) *http.Request
	// MaxResultBytes caps one message of an upstream answer.
	MaxResultBytes int64
	// ResumeWait is how long a recovered task waits for the route to serve.
	ResumeWait time.Duration
	// RequestBase, when set, asks the glue to make the route serve a
	// request of the gateway's own (Route.Served), so that a recovered
	// task waiting for one starts without a client's: the request goes to
	// t's endpoint and host, where its call went. ctx ends with the
	// runtime. Nil, or a request that does not reach the route: the task
	// waits for a client's request (basereq.go).
	RequestBase func(ctx context.Context, t *task.Task)
	// RetryOnRestart names the tools whose calls run again after a restart.
	RetryOnRestart map[string]bool
	// RunTimeout bounds how long a task's tool may run ([runTimer]);
	// 0 means no bound but the task's ttl. ToolRunTimeouts holds per-tool
	// limits, which take precedence (0 there: none for that tool).
	RunTimeout      time.Duration
	ToolRunTimeouts map[string]time.Duration
	// SweepInterval spaces the sweeps of expired tasks.
	SweepInterval time.Duration
	// LeaseTTL is how long a worker's lease lasts ([Leases]); 0 means
	// LeaseTTL.
	LeaseTTL time.Duration
	// Observer counts lifecycle events; nil ignores them.
	Observer task.Observer
	// Logger and AuditLogger receive the route's logs; never nil.
	Logger, AuditLogger *zap.Logger
	// SessionLost reports whether ev, the final answer to a task's call
	// on a 2025-11-25 upstream session (the client's own, or one the
	// version bridge holds), says the upstream no longer knows that
	// session, and lets the session go: the gateway forgets the client's
	// binding, the bridge its upstream session. Such a task fails with
	// an error that says so. Nil: never.
	SessionLost func(t *task.Task, ev *upstream.Event) bool
	// Upstream is what the route's calls learned of its upstream's health,
	// for the runtime's health report; nil: not reported.
	Upstream *upstream.State
}

// Route is what the runtime knows of one route: its policy, its loggers and
// the base its work without a client request goes through.
type Route struct {
	cfg      RouteConfig
	rt       *Runtime
	log      *zap.Logger
	auditLog *zap.Logger
	reads    readSet // the reads audited at info level
	base     *routeBase
	started  atomic.Bool
	traces   routeTracing // the tracer its requests were traced with (tracing.go)
}

// Start is called when the route's configuration starts serving: it opens
// the runtime's store if no configuration did yet, makes the route the one
// background work and re-runs of its tasks follow, and, the first time,
// recovers the tasks a previous process left.
func (route *Route) Start() error {
	if route.started.Load() {
		return nil
	}
	if err := route.rt.open(); err != nil {
		route.rt.routes.startFailed(route, err)
		return fmt.Errorf("opening the task store: %w", err)
	}
	route.rt.routes.startFailed(nil, nil)
	if route.started.CompareAndSwap(false, true) {
		route.rt.adopt(route)
	}
	return nil
}

// Started reports whether Start succeeded.
func (route *Route) Started() bool { return route.started.Load() }

// Close is called when the route's configuration is cleaned up (whether or
// not it started): another started route takes over background work.
func (route *Route) Close() { route.rt.routes.remove(route) }

// sessionLost applies the adapters' hook, if any.
func (route *Route) sessionLost(t *task.Task, ev *upstream.Event) bool {
	return route.cfg.SessionLost != nil && route.cfg.SessionLost(t, ev)
}
