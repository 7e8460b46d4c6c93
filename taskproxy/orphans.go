package taskproxy

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
)

// The orphan pass. A task leased to this process whose worker is gone (it
// returned without its outcome stored, say because every write failed) is
// never renewed: its lease runs out while no other process may take it
// over, since this one lives. Every orphanInterval the pass fails such
// tasks, so that none stays working until its ttl.

// orphanInterval spaces the orphan passes.
const orphanInterval = leaseTTL

// msgWorkerLost is the error of a task the orphan pass failed.
const msgWorkerLost = "the task's worker stopped without recording an outcome"

// failOrphansLoop runs the orphan pass until the runtime closes.
func (rt *Runtime) failOrphansLoop() {
	defer rt.loops.Done()
	tick := time.NewTicker(orphanInterval)
	defer tick.Stop()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case <-tick.C:
			if g := rt.gateway.Load(); g != nil {
				g.failOrphans(rt.ctx, clock())
			}
		}
	}
}

// failOrphans fails the tasks leased to this process, with the lease run
// out at now, that no worker of this process runs, and returns how many.
func (g *Gateway) failOrphans(ctx context.Context, now time.Time) int {
	holder, failed, cursor := g.rt.Store.Holder(), 0, ""
	orphaned := func(t *Task) bool {
		_, running := g.rt.workers.get(t.ID)
		_, resuming := g.rt.resuming.Load(t.ID)
		return !running && !resuming && t.Lease.Holder == holder && t.Lease.Expires.Before(now)
	}
	for {
		tasks, next, err := g.rt.Store.ListActive(ctx, cursor, 200)
		if err != nil {
			if ctx.Err() == nil {
				g.log.Warn("listing tasks for the orphan pass", zap.Error(err))
			}
			return failed
		}
		for _, t := range tasks {
			if !orphaned(t) {
				continue
			}
			// Checked again in the compare-and-set: a worker started
			// meanwhile renewed the lease first.
			rec, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *Task) error {
				if !orphaned(rec) {
					return errNoChange
				}
				applyOutcome(rec, nil, Errorf(CodeInternalError, "%s", msgWorkerLost), clock())
				return nil
			})
			switch {
			case err == nil:
				failed++
				g.log.Warn("failed a task whose worker was lost", zap.String("task", t.ID))
				g.auditOutcome(rec)
				g.rt.Hub.Changed(t.ID)
			case !errors.Is(err, errNoChange) && !outcomeSettled(err):
				g.log.Warn("failing a task whose worker was lost", zap.String("task", t.ID), zap.Error(err))
			}
		}
		if next == "" {
			return failed
		}
		cursor = next
	}
}
