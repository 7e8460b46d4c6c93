package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Several gateway processes (replicas) on one shared store. A task's worker
// runs in the replica that accepted the call; any replica may serve the
// task's other requests. What must cross between them travels as events
// ([Hub.Relayed]) through the store's relay:
//
//   - a cancel recorded elsewhere stops the worker here (watchRemote), as a
//     local tasks/cancel does;
//   - input answered elsewhere wakes a worker waiting for it here (its wait
//     re-reads the task on every event);
//   - an outcome recorded here wakes tasks/result waiters and subscriptions
//     elsewhere.
//
// And a replica that dies leaves its tasks leased until the lease expires;
// then another replica takes them over (TakeOver), as recovery after a
// restart does. None of this runs for a store only one process uses.

// MsgReplicaLost is the status message (and error) of a task whose worker's
// replica stopped and whose tool may not run again.
const MsgReplicaLost = "the gateway replica running the call stopped; the upstream result is unknown"

// MsgReplicaRerun is the status message of a task re-run after its
// worker's replica stopped.
const MsgReplicaRerun = "re-running the call after the gateway replica running it stopped (the tool is declared retry_on_restart)"

// MsgReplicaRouteGone is the status message (and error) of a task taken
// over from a replica that stopped by a replica that does not configure
// the route that created it.
const MsgReplicaRouteGone = "the gateway replica running the call stopped, and the route that created the task is not configured on the replica that took it over; the upstream result is unknown"

// openShared attaches the store's event relay to the hub and starts the
// takeover loop, when the store is shared between processes.
func (rt *Runtime) openShared() error {
	es, ok := rt.Store.(task.EventSource)
	if !ok || rt.relay != nil {
		return nil
	}
	relay, err := es.RelayEvents(rt.Hub)
	if err != nil {
		return fmt.Errorf("starting the store's event relay: %w", err)
	}
	rt.relay = relay
	rt.Hub.setRelay(relay)
	rt.loops.Add(1)
	go takeoverLoop{rt}.run()
	return nil
}

// closeShared stops the relay, before the store closes.
func (rt *Runtime) closeShared() {
	if rt.relay == nil {
		return
	}
	rt.Hub.setRelay(nil)
	if err := rt.relay.Close(); err != nil {
		if route := rt.routes.inCharge(); route != nil {
			route.log.Warn("closing the store's event relay", zap.Error(err))
		}
	}
}

// watchRemote stops run when t's record is cancelled by another replica:
// it re-reads the task on every event until the worker ends.
func (w *worker) watchRemote() {
	route, t, run := w.route, w.t, w.run
	sub := route.rt.Hub.Subscribe(t.ID) // now, so that no event is missed
	owner, id := t.Owner, t.ID
	go func() {
		defer sub.Close()
		for {
			select {
			case <-run.Ctx.Done():
				return
			case <-sub.Changed:
			}
			if run.Ctx.Err() != nil || run.cancelling.Load() {
				return
			}
			rec, err := route.rt.Store.Get(run.Ctx, owner, id)
			if err != nil || rec.Status != task.StatusCancelled {
				continue // a change of the worker's own, or a read that failed: the next event re-reads
			}
			route.stopCancelled(run.Ctx, run, rec)
			return
		}
	}()
}

// stopCancelled stops the upstream call of a task whose record is
// cancelled, once whoever notices first: on 2025-11-25 the upstream is sent
// notifications/cancelled with the id and session it knows; on 2026-07-28
// closing the stream is the cancellation. A task the upstream runs gets
// tasks/cancel instead, once its id is known (stopUpstreamCall).
func (route *Route) stopCancelled(ctx context.Context, run *Run, t *task.Task) {
	if !run.cancelling.CompareAndSwap(false, true) {
		return
	}
	route.stopUpstreamCall(ctx, run, t, "task cancelled by the client")
	run.stop(errTaskCancelled)
}

// renewResuming renews the leases of recovered tasks that wait for their
// route to serve a request (resume): another replica must not take them
// over meanwhile and run them too. A task that has waited its ResumeWait
// has its lease released instead, so that a replica whose route serves
// requests takes it: a replica without traffic on the route would
// otherwise hold it for ever.
func (lr leaseRenewal) renewResuming() {
	rt := lr.rt
	now := Now()
	rt.resuming.Range(func(k, v any) bool {
		id, rs := k.(string), v.(*resumingTask)
		rs.mu.Lock()
		switch {
		case rs.released || rs.resumed: // its worker's lease is renewed with the workers'
		case now.Sub(rs.since) >= rs.wait:
			err := rt.releaseLease(rt.ctx, rs.owner, id)
			// Not this process's lease any more, however it ended; a
			// store that failed is asked again at the next round.
			rs.released = err == nil || errors.Is(err, task.ErrLeaseHeld) || outcomeSettled(err)
			if route := rt.routes.inCharge(); route != nil && err == nil {
				route.log.Info("released the lease of a task whose route served no request here", zap.String("task", id))
			}
		default:
			_, _ = rt.Store.Acquire(rt.ctx, rs.owner, id, rt.Store.Holder(), now, rt.Leases.TTL())
		}
		rs.mu.Unlock()
		return rt.ctx.Err() == nil
	})
}

// takeoverLoop takes over the tasks of dead replicas every lease renewal
// period (Leases.Renew), and at once when a replica that stops announces
// leases it released (task.EventReleased); once the first recovery pass
// is done, and not while the store was failing a lease's length ago
// (takeoverQuiet): while the store was unavailable, live replicas could
// not renew their leases either, and they renew them within that once it
// is back. A process that drains takes nothing over: it is about to stop.
type takeoverLoop struct{ rt *Runtime }

func (tl takeoverLoop) run() {
	rt := tl.rt
	defer rt.loops.Done()
	// A stopping replica that let tasks go wakes the loop: take them now.
	ticker{interval: rt.Leases.Renew, wake: rt.Hub.Released()}.run(rt.ctx, func(time.Time) {
		if now := Now(); rt.recovered.Load() && rt.routes.inCharge() != nil && !rt.Drain.Draining() && !rt.takeoverQuiet.quiet(now) {
			if _, err := rt.TakeOver(now); err != nil {
				// From the pass's end: a listing that failed slowly
				// (a store timing out) took part of the period already.
				rt.takeoverQuiet.troubled(Now(), rt.Leases.TTL())
			}
		}
	})
}

// TakeOver claims the active tasks whose lease another holder let expire
// by now and treats them as recovery does: tools declared retry_on_restart
// run again, 2026-07-28 tasks waiting for input wait on here, the others
// fail with MsgReplicaLost. The lease's compare-and-set (Acquire) decides
// between replicas racing for one task, so none runs twice. It returns how
// many it claimed. A process that drains (Drain) claims none.
//
// A store that lists expired leases alone (ExpiredLeaseLister) is asked
// for those; otherwise each pass reads every active task (ListActive),
// cheap enough every ten seconds for a gateway's active tasks. A listing
// that fails ends the pass with its error.
func (rt *Runtime) TakeOver(now time.Time) (int, error) {
	ctx, holder := rt.ctx, rt.Store.Holder()
	list := rt.Store.ListActive
	if el, ok := rt.Store.(task.ExpiredLeaseLister); ok {
		list = func(ctx context.Context, cursor string, limit int) ([]*task.Task, string, error) {
			return el.ListExpiredLeases(ctx, now, cursor, limit)
		}
	}
	claimed, cursor := 0, ""
	for {
		tasks, next, err := list(ctx, cursor, 200)
		if err != nil {
			if route := rt.routes.inCharge(); route != nil && ctx.Err() == nil {
				route.log.Warn("listing tasks to take over", zap.Error(err))
			}
			return claimed, err
		}
		for _, t := range tasks {
			if t.Lease.Holder == holder || t.Lease.Expires.After(now) {
				continue // ours, or a live replica's
			}
			if _, running := rt.workers.get(t.ID); running {
				continue
			}
			if _, resuming := rt.resuming.Load(t.ID); resuming {
				continue
			}
			if rt.Drain.Draining() {
				return claimed, nil // stopping: the other replicas take them
			}
			rec, err := rt.Store.Acquire(ctx, t.Owner, t.ID, holder, Now(), rt.Leases.TTL())
			if err != nil {
				continue // another replica was faster, or the task ended
			}
			claimed++
			if route := rt.routes.inCharge(); route != nil {
				route.log.Info("taking over a task whose replica stopped", zap.String("task", t.ID), zap.String("previous_holder", t.Lease.Holder))
			}
			observeTakeover(rt, rec, task.TakeoverReplica)
			rt.recoverTask(ctx, rec, afterReplicaStop)
		}
		if next == "" {
			return claimed, nil
		}
		cursor = next
	}
}

// leaderSweeper names the sweeping duty.
const leaderSweeper = "sweeper"

// sweeperLeaseTTL is how long a sweeper's leadership lasts: over two sweep
// intervals, so that the leader renews it in time; a dead leader is
// replaced within that.
func sweeperLeaseTTL(interval time.Duration) time.Duration {
	return 2*interval + LeaseRenew
}

// leads reports whether this process leads duty name, taking or renewing
// the leadership when the store elects one. A store that cannot tell
// (failed query) is not led: the duty waits for the next round.
func (s sweeper) leads(route *Route, name string, ttl time.Duration) bool {
	rt := s.rt
	l, ok := rt.Store.(task.Leader)
	if !ok {
		return true
	}
	ok, err := l.TryLead(rt.ctx, name, rt.Store.Holder(), ttl)
	if err != nil && !errors.Is(err, context.Canceled) {
		route.log.Warn("electing the "+name, zap.Error(err))
	}
	return err == nil && ok
}
