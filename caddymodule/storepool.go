package caddymodule

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
)

// runtimes holds one task runtime (Badger store, hub, workers) per absolute
// storage directory. Caddy provisions a new configuration before it cleans
// up the old one; without the pool the new one would try to open a
// directory the old one still holds locked.
var runtimes = caddy.NewUsagePool()

// shutdownGrace is how long closing a runtime waits for its workers to
// notice and return before the store closes under them.
const shutdownGrace = 5 * time.Second

// pooledRuntime is the usage pool's value: destructed when the last
// configuration using the directory is cleaned up.
type pooledRuntime struct{ rt *taskproxy.Runtime }

func (p pooledRuntime) Destruct() error { return p.rt.Close(shutdownGrace) }

// acquireRuntime returns the runtime of dir. Its store is not opened here:
// a configuration that is only provisioned (caddy validate, a reload that
// fails) must not take Badger's directory lock or recover anything; the
// store opens when a configuration using it starts serving
// (taskproxy.Gateway.Start). Every successful call must be matched by
// runtimes.Delete(dir).
func acquireRuntime(dir string, syncWrites bool, logger *zap.Logger) (*taskproxy.Runtime, error) {
	val, _, err := runtimes.LoadOrNew(dir, func() (caddy.Destructor, error) {
		return pooledRuntime{taskproxy.NewLazyRuntime(func() (taskproxy.Store, error) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("creating task store directory %s: %w", dir, err)
			}
			store, err := taskproxy.OpenBadgerStore(taskproxy.BadgerOptions{Dir: dir, SyncWrites: syncWrites, Logger: logger})
			if err != nil {
				return nil, fmt.Errorf("opening task store %s: %w", dir, err)
			}
			return store, nil
		})}, nil
	})
	if err != nil {
		return nil, err
	}
	return val.(pooledRuntime).rt, nil
}

// detachRequest copies r for a task worker, which outlives r: the context
// keeps Caddy's values but not r's cancellation, and the things handlers
// write to (variables, the replacer, extra log fields) are fresh copies, so
// the worker and the finishing client request never write to the same map.
func detachRequest(r *http.Request) *http.Request {
	ctx := context.WithoutCancel(r.Context())
	vars := map[string]any{}
	if v, ok := r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any); ok {
		maps.Copy(vars, v)
	}
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, vars)
	ctx = context.WithValue(ctx, caddyhttp.ExtraLogFieldsCtxKey, new(caddyhttp.ExtraLogFields))
	detached := r.Clone(ctx)
	caddyhttp.NewTestReplacer(detached) // a new replacer with detached's HTTP placeholders
	return detached
}
