package taskproxy

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Runtime is the state that outlives one configuration: the store, the hub,
// the running workers, the call and session tables, and the background work
// on the store (lease renewal, sweeping, recovery after a restart).
// Configurations that share a storage directory share one Runtime.
type Runtime struct {
	Store    Store
	Hub      *Hub
	workers  *workerTable
	sessions *sessionTable

	ctx    context.Context
	cancel context.CancelCauseFunc
	loops  sync.WaitGroup

	// gateway is the latest configuration's gateway; background work uses
	// its settings.
	gateway atomic.Pointer[Gateway]
	// Work that starts without a client request (re-runs after a restart)
	// goes through the next handler of a request the route served: once
	// such work waits (awaitingBase), the next request served is detached
	// into base, and firstServed is closed.
	awaitingBase atomic.Bool
	base         *servedRequest
	firstServed  chan struct{}
	servedOnce   sync.Once
	recoverOnce  sync.Once
	// resuming holds the ids of recovered tasks waiting for a base, so
	// that the orphan pass leaves them alone.
	resuming sync.Map
	// unsettled holds the ids (and owners) of tasks whose worker could not
	// store even a failure, for the orphan loop to retry.
	unsettled sync.Map
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

// NewRuntime wraps an open store and starts its background work.
func NewRuntime(store Store) *Runtime {
	ctx, cancel := context.WithCancelCause(context.Background())
	rt := &Runtime{Store: store, Hub: NewHub(), workers: newWorkerTable(),
		sessions: newSessionTable(maxSessions), ctx: ctx, cancel: cancel, firstServed: make(chan struct{})}
	rt.loops.Add(3)
	go rt.renewLeases()
	go rt.sweep()
	go rt.failOrphansLoop()
	return rt
}

// errShutdown is the cause workers see when the runtime closes.
var errShutdown = errors.New("gateway shutting down")

// Close lets workers finish for up to grace, then stops the rest (their
// tasks stay as they are in the store, for recovery at the next start),
// waits briefly for them to return, and closes the store.
func (rt *Runtime) Close(grace time.Duration) error {
	done := make(chan struct{})
	go func() { rt.workers.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
	}
	rt.cancel(errShutdown)
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	rt.loops.Wait()
	return rt.Store.Close()
}

// RunningWorkers returns how many task workers run in this process.
func (rt *Runtime) RunningWorkers() int { return rt.workers.count() }

// adopt makes g the configuration background work follows, and starts
// recovery the first time.
func (rt *Runtime) adopt(g *Gateway) {
	rt.gateway.Store(g)
	rt.recoverOnce.Do(func() {
		rt.loops.Add(1)
		go func() {
			defer rt.loops.Done()
			g.recover()
		}()
	})
}

// served offers the request being served as the base of waiting work. It
// is detached here, on the request's own goroutine, where nothing else
// writes to its Caddy variables; until work waits it costs one atomic load.
func (rt *Runtime) served(g *Gateway, r *http.Request, next http.Handler) {
	if !rt.awaitingBase.Load() {
		return
	}
	rt.servedOnce.Do(func() {
		rt.base = &servedRequest{r: g.cfg.Detach(r), next: next}
		close(rt.firstServed)
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
			if errors.Is(err, ErrLeaseHeld) {
				run.cancel(errLeaseLost)
			}
		}
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
