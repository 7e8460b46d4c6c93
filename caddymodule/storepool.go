package caddymodule

import (
	"context"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// runtimes holds one task runtime (store, hub, workers) per store
// identity (StorageBackend.StoreID: the absolute directory of a Badger
// store, the DSN and schema of a PostgreSQL one). Caddy provisions a new
// configuration before it cleans up the old one; without the pool the new
// one would try to open a directory the old one still holds locked, or a
// second connection pool to the same database.
var runtimes = caddy.NewUsagePool()

// shutdownGrace is how long closing a runtime waits for its workers to
// notice and return before the store closes under them, when no drain
// period applies: a reload that drops a store, or a process stopping whose
// servers wait for connections for ever (no grace_period) and that sets no
// drain (a process manager kills it long before tasks end).
const shutdownGrace = 5 * time.Second

// stoppingSince is when a configuration last announced that it stops
// (Caddy's "stopping" event), in Unix nanoseconds; 0 before any did.
// Caddy cleans up a configuration's handlers one after the other, so a
// grace period per store would add up: with three stores running tasks,
// caddy stop took 15 s, past what systemd and docker wait before SIGKILL.
// The stores share one grace period, counted from the stopping event.
var stoppingSince atomic.Int64

// drainFor is the grace period of a process that exits (Handler.drain of
// the stopping configuration's handlers, the longest), in nanoseconds; 0
// while it does not exit.
var drainFor atomic.Int64

// markStopping records that a configuration stops now; when the process
// exits, its running tasks get drain to finish (the longest any handler
// asks for) instead of shutdownGrace.
func markStopping(exiting bool, drain time.Duration) {
	stoppingSince.Store(time.Now().UnixNano())
	if !exiting {
		return
	}
	for {
		cur := drainFor.Load()
		if int64(drain) <= cur || drainFor.CompareAndSwap(cur, int64(drain)) {
			return
		}
	}
}

// graceLeft is what is left of the shared grace period (drainFor when the
// process exits, else shutdownGrace) after the last stopping event, or all
// of it when none was announced.
func graceLeft(now time.Time) time.Duration {
	period := shutdownGrace
	if d := time.Duration(drainFor.Load()); d > 0 {
		period = d
	}
	since := stoppingSince.Load()
	if since == 0 {
		return period
	}
	return min(max(period-now.Sub(time.Unix(0, since)), 0), period)
}

// pooledRuntime is the usage pool's value: destructed when the last
// configuration using the store is cleaned up.
type pooledRuntime struct {
	rt      *taskproxy.Runtime
	name    string // StorageBackend.StoreName, for operators
	backend string
	// settings are the open-time options of the backend the store opens
	// with (storeSettings), "" for a backend without such options.
	settings string
}

func (p pooledRuntime) Destruct() error { return p.rt.Close(graceLeft(time.Now())) }

// acquireRuntime returns the runtime of the backend's store. Its store is
// not opened here: a configuration that is only provisioned (caddy
// validate, a reload that fails) must not take Badger's directory lock,
// connect or recover anything; the store opens when a configuration using
// it starts serving (taskproxy.Gateway.Start). Every successful call must be
// matched by runtimes.Delete(key), with the key it returns.
//
// A configuration that shares a store already in use but asks for other
// open-time settings (a reload from sync_writes on to off, say) gets the
// store as it is; a warning says which settings stay in force until the
// store is opened again, at the next start of Caddy.
func acquireRuntime(backend StorageBackend, logger *zap.Logger) (rt *taskproxy.Runtime, key string, err error) {
	key = backend.StoreID()
	settings := ""
	if s, ok := backend.(storeSettings); ok {
		settings = s.OpenSettings()
	}
	val, loaded, err := runtimes.LoadOrNew(key, func() (caddy.Destructor, error) {
		return pooledRuntime{
			rt: taskproxy.NewLazyRuntime(func() (task.Store, error) {
				s, err := backend.OpenStore(logger)
				if err != nil {
					return nil, err
				}
				return timeStore(s, backend.Backend()), nil
			}),
			name:     backend.StoreName(),
			backend:  backend.Backend(),
			settings: settings,
		}, nil
	})
	if err != nil {
		return nil, "", err
	}
	pooled := val.(pooledRuntime)
	if loaded && pooled.settings != settings {
		logger.Warn("the task store is in use with other settings, which stay in force until Caddy restarts: they apply only when the store opens",
			zap.String("store", pooled.name), zap.String("in_force", pooled.settings), zap.String("configured", settings))
	}
	return pooled.rt, key, nil
}

// detachRequest copies r for a task worker, which outlives r: the context
// keeps Caddy's values but not r's cancellation, and the things handlers
// write to (variables, the replacer, extra log fields) are fresh copies, so
// the worker and the finishing client request never write to the same map.
//
// The new replacer answers the HTTP placeholders from the copy and falls
// back to r's replacer for what earlier handlers set on it (such as
// {http.auth.user.*} from basic_auth, forward_auth or this module's JWT
// check), so reverse_proxy's header_up resolves on task calls exactly as on
// plain ones. Response placeholders are not inherited: they belong to the
// client's response, which another goroutine writes.
//
// A re-run after a restart (task.IsRerun) starts from a request some
// other caller sent: it inherits no authentication placeholders, client
// address or TLS state of that caller ({http.request.remote} and client_ip
// name the gateway's own listener address), and {http.auth.user.id} names
// the task's own principal.
func detachRequest(r *http.Request) *http.Request {
	ctx := context.WithoutCancel(r.Context())
	rerun := task.IsRerun(ctx)
	vars := map[string]any{}
	if v, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		maps.Copy(vars, v)
	}
	gatewayAddr := ""
	if rerun {
		// The gateway itself originates a re-run: it stands in as the
		// client, in place of whoever sent the request served first.
		gatewayAddr = "0.0.0.0:0"
		if a, ok := ctx.Value(http.LocalAddrContextKey).(net.Addr); ok {
			gatewayAddr = a.String()
		}
		host, _, _ := net.SplitHostPort(gatewayAddr)
		vars[caddyhttp.ClientIPVarKey] = host
	}
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, vars)
	ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, new(caddyhttp.ExtraLogFields))
	detached := r.Clone(ctx)
	if rerun {
		detached.TLS, detached.RemoteAddr = nil, gatewayAddr
	}
	orig, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	repl := caddyhttp.NewTestReplacer(detached) // a new replacer with detached's HTTP placeholders
	if orig != nil {
		repl.Map(func(key string) (any, bool) {
			if strings.HasPrefix(key, "http.response.") || rerun && strings.HasPrefix(key, "http.auth.") {
				return nil, false
			}
			return orig.Get(key)
		})
	}
	if who := task.CallerOf(ctx); rerun && who.Owner != task.Anonymous {
		repl.Set("http.auth.user.id", who.Principal)
	}
	return detached
}
