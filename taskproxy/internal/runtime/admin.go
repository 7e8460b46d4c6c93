package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What the operator's admin API does with a runtime: browse its tasks,
// cancel one as its owner would, and report health.

// auditOperatorCancelled is the audit event of a cancellation by an operator.
const auditOperatorCancelled = "task cancelled by operator"

// adminStore returns the store for operator access.
func (op Operator) adminStore() (task.AdminLister, error) {
	rt := op.rt
	if !rt.Ready() {
		return nil, task.ErrNotReady
	}
	al, ok := rt.Store.(task.AdminLister)
	if !ok {
		return nil, task.ErrNoAdminAccess
	}
	return al, nil
}

// ListAll pages through the tasks of every owner, newest first
// (AdminLister.ListAll). It gives ErrNotReady before the store opened.
func (op Operator) ListAll(ctx context.Context, filter task.TaskFilter, cursor string, limit int) ([]*task.Task, string, error) {
	al, err := op.adminStore()
	if err != nil {
		return nil, "", err
	}
	return al.ListAll(ctx, filter, cursor, limit)
}

// GetAny returns the task with id whatever its owner (AdminLister.GetAny).
func (op Operator) GetAny(ctx context.Context, id string) (*task.Task, error) {
	al, err := op.adminStore()
	if err != nil {
		return nil, err
	}
	return al.GetAny(ctx, id)
}

// Running reports whether a worker of this process runs task id.
func (op Operator) Running(id string) bool {
	rt := op.rt
	_, ok := rt.workers.get(id)
	return ok
}

// CancelAsOperator cancels task id as its owner's tasks/cancel would: the
// cancellation is stored, subscribers hear of it, and the upstream is told
// (notifications/cancelled on 2025-11-25, the call's stream closed on
// 2026-07-28); its status message (MsgOperatorCancelled) tells the owner
// that an operator cancelled it. The audit log records it as the owner's
// cancellation and, in a second line, the operator who asked. A terminal
// task gives ErrTerminal with the task.
func (op Operator) CancelAsOperator(ctx context.Context, id, operator string) (*task.Task, error) {
	rt := op.rt
	t, err := op.GetAny(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return t, task.ErrTerminal
	}
	route := rt.RouteFor(t.Route)
	if route == nil { // the route is gone: the route in charge has the store and logs
		route = rt.routes.inCharge()
	}
	if route == nil {
		return nil, task.ErrNotReady
	}
	// The upstream's notification goes through Caddy's handler chain,
	// which needs the values of a request Caddy served (its replacer,
	// server, variables): the worker's own detached request has them, the
	// admin request does not.
	if run, ok := rt.workers.get(id); ok && run.Base != nil {
		ctx = run.Base.Context()
	}
	cancelled, err := cancelTask(ctx, route, t.Owner, id, MsgOperatorCancelled)
	if err != nil {
		if errors.Is(err, task.ErrTerminal) { // it ended meanwhile
			if now, gerr := op.GetAny(ctx, id); gerr == nil {
				return now, task.ErrTerminal
			}
		}
		return nil, fmt.Errorf("cancelling task %s: %w", id, err)
	}
	if ce := route.auditLog.Check(zap.InfoLevel, auditOperatorCancelled); ce != nil {
		ce.Write(zap.String("task", id), zap.String("principal", t.Principal), zap.String("tenant", t.Tenant),
			zap.String("tool", t.Tool), zap.String("operator", operator))
	}
	return cancelled, nil
}

// Health is what a load balancer check needs to know of a runtime.
type Health struct {
	// Open: the store is open (a configuration using it started).
	Open bool `json:"open"`
	// Reachable: a read of the store succeeded just now.
	Reachable bool `json:"reachable"`
	// Writable: the store takes writes (a store that can tell, as Badger's
	// disk guard does, found its filesystem writable and with room; any
	// other store that is reachable is taken as writable).
	Writable bool `json:"writable"`
	// Error says why the store is not reachable or not writable.
	Error string `json:"error,omitempty"`
	// Workers is the number of task workers running in this process.
	Workers int `json:"workers"`
	// Recovered: the recovery pass after the start (taking over, re-running
	// or failing the tasks a previous process left running) is done.
	Recovered bool `json:"recovered"`
	// Draining: the process stops and takes no new tasks (Drain); a load
	// balancer should send them elsewhere.
	Draining bool `json:"draining,omitempty"`
	// Upstreams is the last known state of the upstream of each route
	// serving on the store. It does not count in Healthy: an upstream
	// that is down fails calls, but the store still serves its tasks.
	Upstreams []RouteUpstream `json:"upstreams,omitempty"`
}

// RouteUpstream is the state of one route's upstream.
type RouteUpstream struct {
	// Route is the route's name (the site and the handler's place in it).
	Route string `json:"route"`
	upstream.StateReport
}

// healthProbeTimeout bounds the health probe's read of the store.
const healthProbeTimeout = 5 * time.Second

// Healthy reports whether the store is open, reachable and writable,
// recovery is done, and the process is not draining.
func (h Health) Healthy() bool {
	return h.Open && h.Reachable && h.Writable && h.Recovered && !h.Draining
}

// Health reads the store once (a lookup of an id that cannot exist) and
// reports the runtime's state.
func (rt *Runtime) Health(ctx context.Context) Health {
	if !rt.Ready() {
		// A configuration whose start could not open the store (another
		// process held it) is tried again here too, so that a probe alone
		// sees the store come back; otherwise only a request would.
		if err := rt.retryStart(); err != nil {
			return Health{Error: err.Error()}
		}
	}
	h := Health{Open: rt.Ready(), Workers: rt.RunningWorkers(), Recovered: rt.recovered.Load(), Draining: rt.Drain.Draining(),
		Upstreams: rt.routes.upstreams()}
	if !h.Open {
		h.Error = task.ErrNotReady.Error()
		return h
	}
	// A store that does not answer (a database host whose network drops
	// packets) is unhealthy, not a probe that hangs as long as the
	// connection does.
	ctx, cancel := context.WithTimeout(ctx, healthProbeTimeout)
	defer cancel()
	_, err := rt.Store.Get(ctx, "", "health-probe") // not a task id: ids are 22 characters
	switch {
	case err == nil, errors.Is(err, task.ErrNotFound):
		h.Reachable, h.Writable = true, true
	default:
		h.Error = err.Error()
		return h
	}
	// A store whose filesystem is full or read-only still reads, but
	// refuses every new task: a load balancer should send them elsewhere.
	if wc, ok := rt.Store.(task.WriteChecker); ok {
		if err := wc.CheckWritable(); err != nil {
			h.Writable, h.Error = false, err.Error()
		}
	}
	return h
}

// Operator is what an operator (the admin API, metrics) may do with a
// runtime's tasks across owners: list and read them, see where they run,
// cancel them, delete finished ones, and read the store's figures.
type Operator struct{ rt *Runtime }

// Operator returns the runtime's operator view.
func (rt *Runtime) Operator() Operator { return Operator{rt} }
