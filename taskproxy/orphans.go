package taskproxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Tasks left working by this process. A worker that cannot store its
// outcome notes its task as unsettled, with the outcome if the store is
// only unavailable for now (a database down, a full disk) and otherwise
// with a small failure; every unsettledRetry the orphan loop tries again.
// And a task leased to this process whose worker is gone without a note
// (it is never renewed: its lease runs out while no other process may take
// it over, since this one lives) is found by a scan of the active tasks
// every orphanScanInterval and fails. Either way no task stays working
// until its ttl.

const (
	// unsettledRetry spaces the retries of unsettled tasks.
	unsettledRetry = leaseRenew
	// orphanScanInterval spaces the scans for orphans: each reads every
	// active task, so it is the rare safety net.
	orphanScanInterval = 5 * time.Minute
)

// msgWorkerLost is the error of a task the orphan scan failed.
const msgWorkerLost = "the task's worker stopped without recording an outcome"

// failOrphansLoop retries unsettled tasks and scans for orphans until the
// runtime closes.
func (rt *Runtime) failOrphansLoop() {
	defer rt.loops.Done()
	tick := time.NewTicker(unsettledRetry)
	defer tick.Stop()
	lastScan := time.Now()
	for {
		select {
		case <-rt.ctx.Done():
			return
		case now := <-tick.C:
			g := rt.gateway.Load()
			if g == nil {
				continue
			}
			g.settleUnsettled(rt.ctx)
			if now.Sub(lastScan) >= orphanScanInterval {
				lastScan = now
				g.failOrphans(rt.ctx, clock())
			}
		}
	}
}

// unsettledOutcome is what an unsettled task's record is still to get: the
// call's own outcome while the store was unavailable, else the small
// failure of msgOutcomeLost.
type unsettledOutcome struct {
	owner  string
	result json.RawMessage
	err    *jsonrpc.Error
}

// outcomeLost is the error recorded for an outcome the store refused.
func outcomeLost() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", msgOutcomeLost)
}

// settleUnsettled tries once more to record each unsettled task's outcome,
// and returns how many it settled. An outcome the store refuses for its
// own sake (too large, say) is replaced by the small failure for the next
// try.
func (g *Gateway) settleUnsettled(ctx context.Context) int {
	settled := 0
	g.rt.unsettled.Range(func(k, v any) bool {
		id, u := k.(string), v.(unsettledOutcome)
		rec, err := g.rt.Store.Update(ctx, u.owner, id, func(rec *task.Task) error {
			applyOutcome(rec, u.result, u.err, clock())
			return nil
		})
		switch {
		case err == nil:
			settled++
			g.auditOutcome(rec)
			g.rt.Hub.Changed(id)
			g.rt.unsettled.Delete(id)
		case outcomeSettled(err):
			g.rt.unsettled.Delete(id)
		case storeUnavailable(err):
			if ce := g.log.Check(zap.DebugLevel, "the task store is still unavailable for an unsettled task"); ce != nil {
				ce.Write(zap.String("task", id), zap.Error(err))
			}
		default:
			g.log.Warn("recording the outcome of an unsettled task", zap.String("task", id), zap.Error(err))
			if u.result != nil || u.err == nil || u.err.Message != msgOutcomeLost {
				g.rt.unsettled.Store(id, unsettledOutcome{owner: u.owner, err: outcomeLost()})
			}
		}
		return ctx.Err() == nil
	})
	return settled
}

// failOrphans fails the tasks leased to this process, with the lease run
// out at now, that no worker of this process runs, and returns how many.
func (g *Gateway) failOrphans(ctx context.Context, now time.Time) int {
	holder, failed, cursor := g.rt.Store.Holder(), 0, ""
	orphaned := func(t *task.Task) bool {
		_, running := g.rt.workers.get(t.ID)
		_, resuming := g.rt.resuming.Load(t.ID)
		_, unsettled := g.rt.unsettled.Load(t.ID) // its outcome waits to be written
		return !running && !resuming && !unsettled && t.Lease.Holder == holder && t.Lease.Expires.Before(now)
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
			rec, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
				if !orphaned(rec) {
					return errNoChange
				}
				applyOutcome(rec, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", msgWorkerLost), clock())
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
