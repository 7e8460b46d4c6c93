package runtime

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Runtime is the task state that outlives one configuration: the store, the
// hub, the running workers, the routes, and the background work on the
// store (lease renewal, sweeping, recovery after a restart, takeover).
//
// A runtime does nothing on its own until a route on it starts
// (Route.Start): only then is its store opened, its background work
// started and recovery run. A route that is only provisioned (caddy
// validate, a reload that fails) leaves the store untouched. Store is nil
// until then for a runtime given an opener: check Ready first.
type Runtime struct {
	Store   task.Store
	Hub     *Hub
	workers *workerTable
	views   viewCache // finished tasks' tasks/get answers
	// Inline counts plain clients' calls waiting on an upstream task
	// ([InlineCalls]): active tasks for the owner's bound.
	Inline InlineCalls

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

	// routes are the routes on the runtime ([routeTable]).
	routes      *routeTable
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
	// the store offers it ([Hub.Relayed], [takeoverLoop]).
	relay task.EventRelay
	// takeoverQuiet holds takeovers back after a store failure
	// ([takeoverQuiet]).
	takeoverQuiet takeoverQuiet
	// OutcomeBackoff spaces the retries of an outcome write (storeOutcome);
	// tests shorten it.
	OutcomeBackoff []time.Duration
	// Leases answers the lease timing in force.
	Leases Leases
	// Drain is set while the process stops.
	Drain Drain
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
	// requests are the gateway's own requests for a base (basereq.go).
	requests baseRequests
}

// filled reports whether a served request has become the base.
func (b *routeBase) filled() bool {
	select {
	case <-b.ready:
		return true
	default:
		return false
	}
}

type servedRequest struct {
	r    *http.Request
	next http.Handler
}

// Lease timing by default: a worker's lease lasts LeaseTTL and is renewed
// every LeaseRenew, so a process that dies frees its tasks within LeaseTTL.
// A route may set another ttl (RouteConfig.LeaseTTL, [Leases]).
const (
	LeaseTTL   = 30 * time.Second
	LeaseRenew = 10 * time.Second
	sweepBatch = 500
)

// New returns a runtime on store, or, when store is nil, on the store open
// opens when the first route on it starts, so that merely provisioning a
// configuration opens nothing exclusively (a failed open is tried again at
// the next start). render encodes the tasks/get results the view cache
// keeps.
func New(store task.Store, open func() (task.Store, error), render Renderer) *Runtime {
	ctx, cancel := context.WithCancelCause(context.Background())
	routes := newRouteTable()
	return &Runtime{Store: store, openStore: open, Hub: NewHub(), workers: newWorkerTable(),
		views: viewCache{render: render}, ctx: ctx, cancel: cancel,
		routes:         routes,
		Leases:         Leases{routes: routes},
		OutcomeBackoff: defaultOutcomeBackoff}
}

// HasStore reports whether the runtime has a store or can open one.
func (rt *Runtime) HasStore() bool { return rt.Store != nil || rt.openStore != nil }

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
	go leaseRenewal{rt}.run()
	go sweeper{rt}.run()
	go orphanLoop{rt}.run()
	rt.opened.Store(true)
	return nil
}

// errShutdown is the cause workers see when the runtime closes.
var errShutdown = errors.New("gateway shutting down")

// Close lets workers finish for up to grace, then stops the rest (their
// tasks stay as they are in the store, for recovery at the next start or
// another replica's takeover, their leases released), waits briefly for
// them to return, and closes the store. A runtime that
// never started has nothing running and closes at once. Close drains
// (Drain): from its call on, no task is created or taken over here.
func (rt *Runtime) Close(grace time.Duration) error {
	rt.Drain.Begin()
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
	rt.releaseLeftBehind(left) // another replica takes them at once
	rt.closeShared()
	return rt.Store.Close()
}

// RunningWorkers returns how many task workers run in this process.
func (rt *Runtime) RunningWorkers() int { return rt.workers.count() }

// NewRoute records the route of a provisioned configuration and gives it
// its base.
func (rt *Runtime) NewRoute(cfg RouteConfig) *Route {
	route := &Route{cfg: cfg, rt: rt, log: cfg.Logger, auditLog: cfg.AuditLogger}
	rt.routes.add(route)
	return route
}

// RouteFor returns the route a task of name goes through (routeTable.lookup).
func (rt *Runtime) RouteFor(name string) *Route { return rt.routes.lookup(name) }

// retryStart starts again the configuration whose start failed, if any, and
// returns the error of that start, or of the last failed one.
func (rt *Runtime) retryStart() error {
	route, err := rt.routes.failed()
	if route == nil {
		return err
	}
	return route.Start()
}

// adopt makes route, whose configuration started serving, the one background
// work and its route's tasks follow, and starts recovery the first time.
func (rt *Runtime) adopt(route *Route) {
	rt.routes.adopt(route)
	rt.recoverOnce.Do(func() {
		rt.loops.Go(func() {
			rt.recover()
			rt.recovered.Store(true)
		})
	})
}

// Served offers the request being served as the base of its route's
// waiting work. It is detached here, on the request's own goroutine, where
// nothing else writes to its Caddy variables; until work waits it costs one
// atomic load.
func (route *Route) Served(r *http.Request, next http.Handler) {
	route.traces.saw(r)
	b := route.base
	if !b.awaiting.Load() {
		return
	}
	b.once.Do(func() {
		b.base = &servedRequest{r: route.cfg.Detach(r), next: next}
		close(b.ready)
	})
}

// leaseRenewal keeps the leases of this process's workers alive, every
// Leases.Renew (the route in charge may change it); a worker whose lease
// another process took over is stopped.
type leaseRenewal struct{ rt *Runtime }

func (lr leaseRenewal) run() {
	rt := lr.rt
	defer rt.loops.Done()
	ticker{interval: rt.Leases.Renew}.run(rt.ctx, func(time.Time) { lr.round() })
}

// round renews every worker's lease once, then those of recovered tasks
// waiting for their route.
func (lr leaseRenewal) round() {
	rt := lr.rt
	ttl := rt.Leases.TTL()
	for id, run := range rt.workers.snapshot() {
		// Bounded: one renewal stuck on a failing store must not hold
		// the others past their leases' end.
		ctx, cancel := context.WithTimeout(rt.ctx, min(renewTimeout, LeaseRenewOf(ttl)))
		_, err := rt.Store.Acquire(ctx, run.owner, id, rt.Store.Holder(), Now(), ttl)
		cancel()
		switch {
		case errors.Is(err, task.ErrLeaseHeld):
			// Stopped as an ended task is: a call that may still create
			// the upstream's task is read on, and the task it names
			// cancelled, since the worker that took over cannot follow
			// a task whose id it never learned ([Run.stop]).
			run.stop(errLeaseLost)
		case err != nil && !outcomeSettled(err) && rt.ctx.Err() == nil:
			// Other replicas' renewals fail as well: their leases
			// may lapse meanwhile, through no death of theirs.
			rt.takeoverQuiet.troubled(Now(), ttl)
		}
	}
	lr.renewResuming()
}

var errLeaseLost = errors.New("another worker took over the task's lease")

// renewTimeout bounds one lease renewal.
const renewTimeout = 5 * time.Second

// sweeper deletes expired tasks on the latest configuration's schedule
// (its SweepInterval, looked at every 250 ms) and collects Badger's
// value-log garbage after each pass.
type sweeper struct{ rt *Runtime }

func (s sweeper) run() {
	rt := s.rt
	defer rt.loops.Done()
	var last time.Time
	every(250*time.Millisecond).run(rt.ctx, func(now time.Time) {
		route := rt.routes.inCharge()
		if route == nil || now.Sub(last) < route.cfg.SweepInterval {
			return
		}
		last = now
		s.round(route)
	})
}

// round sweeps once, when this process leads the sweeping.
func (s sweeper) round(route *Route) {
	rt := s.rt
	if !s.leads(route, leaderSweeper, sweeperLeaseTTL(route.cfg.SweepInterval)) {
		return // another replica sweeps
	}
	n, err := rt.Store.Sweep(rt.ctx, Now(), sweepBatch)
	if err != nil && !errors.Is(err, context.Canceled) {
		route.log.Warn("sweeping expired tasks", zap.Error(err))
	}
	if gc, ok := rt.Store.(interface{ CollectGarbage() error }); ok && n > 0 {
		if err := gc.CollectGarbage(); err != nil {
			route.log.Warn("collecting store garbage", zap.Error(err))
		}
	}
}
