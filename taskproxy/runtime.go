package taskproxy

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Runtime is the state that outlives one configuration: the store, the hub,
// the running workers, the call and session tables, and the background work
// on the store (lease renewal, sweeping, recovery after a restart).
// Configurations that share a storage directory share one Runtime.
//
// A runtime does nothing on its own until a configuration using it starts
// serving (Gateway.Start): only then is its store opened, its background
// work started and recovery run. A configuration that is only provisioned
// (caddy validate, a reload that fails) leaves the store untouched. Store
// is nil until then for a runtime from NewLazyRuntime: check Ready first.
type Runtime struct {
	Store    task.Store
	Hub      *Hub
	workers  *workerTable
	sessions *gate.SessionTable
	streams  *gate.StreamTable
	views    viewCache // finished tasks' tasks/get answers (viewcache.go)

	ctx    context.Context
	cancel context.CancelCauseFunc
	loops  sync.WaitGroup

	// openStore opens the store on the first start; nil when the store
	// was given open. opened is set once Store is usable and the loops
	// run; mu guards the opening and closing.
	openStore func() (task.Store, error)
	opened    atomic.Bool
	closed    bool
	mu        sync.Mutex

	// gateway is the gateway of the configuration that started serving
	// last; background work uses its settings.
	gateway atomic.Pointer[Gateway]
	// routes holds, per route, the gateway of the configuration that
	// started serving last, provisioned the gateways built and not yet
	// closed (recovery looks a task's route up there too, so that it
	// finds handlers of the starting configuration that have not heard
	// the start yet), and bases each route's first served request.
	regMu sync.Mutex
	// failedStart is the gateway whose start could not open the store,
	// and openErr why (retryStart).
	failedStart *Gateway
	openErr     error
	routes      map[string]*Gateway
	provisioned map[*Gateway]struct{}
	bases       map[string]*routeBase
	recoverOnce sync.Once
	// recovered is set when the recovery pass after the first start has
	// gone through the store (Health).
	recovered atomic.Bool
	// resuming holds the ids of recovered tasks waiting for a base (each
	// a *resumingTask), so that the orphan pass leaves them alone.
	resuming sync.Map
	// unsettled maps the ids of tasks whose worker could not store their
	// outcome to an unsettledOutcome, for the orphan loop to retry.
	unsettled sync.Map
	// relay carries events to the other processes sharing the store, when
	// the store offers it (events.go, replicas.go).
	relay task.EventRelay
	// outcomeBackoff spaces the retries of an outcome write (storeOutcome).
	outcomeBackoff []time.Duration
}

// routeBase is what work that starts without a client request (re-runs
// after a restart) goes through: the next handler of a request its route
// served. Once such work waits (awaiting), the next request the route
// serves is detached into base, and ready is closed.
type routeBase struct {
	awaiting atomic.Bool
	once     sync.Once
	ready    chan struct{}
	base     *servedRequest
}

type servedRequest struct {
	r    *http.Request
	next http.Handler
}

// Lease timing: a worker's lease lasts leaseTTL and is renewed every
// leaseRenew, so a process that dies frees its tasks within leaseTTL.
const (
	leaseTTL   = 30 * time.Second
	leaseRenew = 10 * time.Second
	sweepBatch = 500
)

// NewRuntime wraps an open store. Its background work starts with the
// first gateway that starts.
func NewRuntime(store task.Store) *Runtime {
	rt := newRuntime()
	rt.Store = store
	return rt
}

// NewLazyRuntime returns a runtime whose store open opens when the first
// gateway on it starts, so that merely provisioning a configuration opens
// nothing exclusively. A failed open is tried again at the next start.
func NewLazyRuntime(open func() (task.Store, error)) *Runtime {
	rt := newRuntime()
	rt.openStore = open
	return rt
}

func newRuntime() *Runtime {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Runtime{Hub: NewHub(), workers: newWorkerTable(),
		sessions: gate.NewSessionTable(gate.MaxSessions), streams: gate.NewStreamTable(), ctx: ctx, cancel: cancel,
		routes: map[string]*Gateway{}, provisioned: map[*Gateway]struct{}{}, bases: map[string]*routeBase{},
		outcomeBackoff: defaultOutcomeBackoff}
}

// Ready reports whether the store is open and the background work runs.
func (rt *Runtime) Ready() bool { return rt.opened.Load() }

// errStoreClosed is returned by a start after the runtime closed.
var errStoreClosed = errors.New("task runtime closed")

// open opens the store, once, and starts the background work on it.
func (rt *Runtime) open() error {
	if rt.opened.Load() {
		return nil
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	switch {
	case rt.opened.Load():
		return nil
	case rt.closed:
		return errStoreClosed
	}
	if rt.Store == nil {
		s, err := rt.openStore()
		if err != nil {
			return err
		}
		rt.Store = s
	}
	if err := rt.openShared(); err != nil {
		return err
	}
	rt.loops.Add(3)
	go rt.renewLeases()
	go rt.sweep()
	go rt.failOrphansLoop()
	rt.opened.Store(true)
	return nil
}

// errShutdown is the cause workers see when the runtime closes.
var errShutdown = errors.New("gateway shutting down")

// Close lets workers finish for up to grace, then stops the rest (their
// tasks stay as they are in the store, for recovery at the next start or
// another replica's takeover, their leases released), waits briefly for
// them to return, and closes the store. A runtime that
// never started has nothing running and closes at once.
func (rt *Runtime) Close(grace time.Duration) error {
	rt.mu.Lock()
	rt.closed = true
	started := rt.opened.Load()
	rt.mu.Unlock()
	if !started {
		rt.cancel(errShutdown)
		if rt.Store != nil {
			return rt.Store.Close()
		}
		return nil
	}
	done := make(chan struct{})
	go func() { rt.workers.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
	left := rt.leftBehind()
	rt.cancel(errShutdown)
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	rt.loops.Wait()
	rt.releaseLeftBehind(left) // another replica takes them at once (release.go)
	rt.closeShared()
	return rt.Store.Close()
}

// RunningWorkers returns how many task workers run in this process.
func (rt *Runtime) RunningWorkers() int { return rt.workers.count() }

// register records a provisioned gateway and gives it its route's base.
func (rt *Runtime) register(g *Gateway) {
	rt.regMu.Lock()
	defer rt.regMu.Unlock()
	rt.provisioned[g] = struct{}{}
	g.base = rt.baseLocked(g.cfg.Route)
}

func (rt *Runtime) baseLocked(route string) *routeBase {
	b, ok := rt.bases[route]
	if !ok {
		b = &routeBase{ready: make(chan struct{})}
		rt.bases[route] = b
	}
	return b
}

// routeBase returns the base of a route.
func (rt *Runtime) routeBase(route string) *routeBase {
	rt.regMu.Lock()
	defer rt.regMu.Unlock()
	return rt.baseLocked(route)
}

// unregister forgets a gateway whose configuration is cleaned up. When it
// was in charge of background work, another started gateway takes over.
func (rt *Runtime) unregister(g *Gateway) {
	rt.regMu.Lock()
	defer rt.regMu.Unlock()
	delete(rt.provisioned, g)
	if rt.failedStart == g {
		rt.failedStart, rt.openErr = nil, nil
	}
	if rt.routes[g.cfg.Route] == g {
		delete(rt.routes, g.cfg.Route)
	}
	if rt.gateway.Load() == g {
		var next *Gateway
		for _, o := range rt.routes {
			next = o
			break
		}
		rt.gateway.Store(next)
	}
}

// startFailed remembers the gateway whose start could not open the store,
// and why, so that a health check can retry the start and report the cause
// (nil, nil once a start succeeded).
func (rt *Runtime) startFailed(g *Gateway, err error) {
	rt.regMu.Lock()
	defer rt.regMu.Unlock()
	rt.failedStart, rt.openErr = g, err
}

// retryStart starts again the gateway whose start failed, if any, and
// returns the error of that start, or of the last failed one.
func (rt *Runtime) retryStart() error {
	rt.regMu.Lock()
	g, err := rt.failedStart, rt.openErr
	rt.regMu.Unlock()
	if g == nil {
		return err
	}
	return g.Start()
}

// adopt makes g, whose configuration started serving, the one background
// work and its route follow, and starts recovery the first time.
func (rt *Runtime) adopt(g *Gateway) {
	rt.regMu.Lock()
	rt.routes[g.cfg.Route] = g
	rt.gateway.Store(g)
	rt.regMu.Unlock()
	rt.recoverOnce.Do(func() {
		rt.loops.Add(1)
		go func() {
			defer rt.loops.Done()
			rt.recover()
			rt.recovered.Store(true)
		}()
	})
}

// gatewayFor returns the gateway a task of route goes through: the one of
// that route that started last, else one provisioned for it (its
// configuration is starting). Tasks stored before routes were recorded
// (route "") go through the gateway in charge. Nil: the route is gone.
func (rt *Runtime) gatewayFor(route string) *Gateway {
	if route == "" {
		return rt.gateway.Load()
	}
	rt.regMu.Lock()
	defer rt.regMu.Unlock()
	if g := rt.routes[route]; g != nil {
		return g
	}
	for g := range rt.provisioned {
		if g.cfg.Route == route {
			return g
		}
	}
	return nil
}

// served offers the request being served as the base of its route's
// waiting work. It is detached here, on the request's own goroutine, where
// nothing else writes to its Caddy variables; until work waits it costs one
// atomic load.
func (g *Gateway) served(r *http.Request, next http.Handler) {
	b := g.base
	if !b.awaiting.Load() {
		return
	}
	b.once.Do(func() {
		b.base = &servedRequest{r: g.cfg.Detach(r), next: next}
		close(b.ready)
	})
}

// renewLeases keeps the leases of this process's workers alive; a worker
// whose lease another process took over is stopped.
func (rt *Runtime) renewLeases() {
	defer rt.loops.Done()
	tick := time.NewTicker(leaseRenew)
	defer tick.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-tick.C:
		}
		for id, run := range rt.workers.snapshot() {
			_, err := rt.Store.Acquire(rt.ctx, run.owner, id, rt.Store.Holder(), clock(), leaseTTL)
			if errors.Is(err, task.ErrLeaseHeld) {
				run.cancel(errLeaseLost)
			}
		}
		rt.renewResuming()
	}
}

var errLeaseLost = errors.New("another worker took over the task's lease")

// sweep deletes expired tasks on the latest configuration's schedule and
// collects Badger's value-log garbage after each pass.
func (rt *Runtime) sweep() {
	defer rt.loops.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last time.Time
	for {
		select {
		case <-rt.ctx.Done():
			return
		case now := <-tick.C:
			g := rt.gateway.Load()
			if g == nil || now.Sub(last) < g.cfg.SweepInterval {
				continue
			}
			last = now
			if !rt.leads(g, leaderSweeper, sweeperLeaseTTL(g.cfg.SweepInterval)) {
				continue // another replica sweeps
			}
			n, err := rt.Store.Sweep(rt.ctx, clock(), sweepBatch)
			if err != nil && !errors.Is(err, context.Canceled) {
				g.log.Warn("sweeping expired tasks", zap.Error(err))
			}
			if gc, ok := rt.Store.(interface{ CollectGarbage() error }); ok && n > 0 {
				if err := gc.CollectGarbage(); err != nil {
					g.log.Warn("collecting store garbage", zap.Error(err))
				}
			}
		}
	}
}
