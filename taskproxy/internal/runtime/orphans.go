package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
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
	unsettledRetry = LeaseRenew
	// orphanScanInterval spaces the scans for orphans: each reads every
	// active task, so it is the rare safety net.
	orphanScanInterval = 5 * time.Minute
)

// MsgWorkerLost is the error of a task the orphan scan failed.
const MsgWorkerLost = "the task's worker stopped without recording an outcome"

// orphanLoop retries unsettled tasks every unsettledRetry and scans for
// orphans every orphanScanInterval, until the runtime closes.
type orphanLoop struct{ rt *Runtime }

func (o orphanLoop) run() {
	rt := o.rt
	defer rt.loops.Done()
	lastScan := time.Now()
	every(unsettledRetry).run(rt.ctx, func(now time.Time) {
		route := rt.routes.inCharge()
		if route == nil {
			return
		}
		route.SettleUnsettled(rt.ctx)
		if now.Sub(lastScan) >= orphanScanInterval {
			lastScan = now
			route.FailOrphans(rt.ctx, Now())
		}
	})
}

// unsettledOutcome is what an unsettled task's record is still to get: the
// call's own outcome while the store was unavailable, else the small
// failure of MsgOutcomeLost.
type unsettledOutcome struct {
	owner  string
	result json.RawMessage
	err    *jsonrpc.Error
}

// outcomeLost is the error recorded for an outcome the store refused.
func outcomeLost() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgOutcomeLost)
}

// SettleUnsettled tries once more to record each unsettled task's outcome,
// and returns how many it settled. An outcome the store refuses for its
// own sake (too large, say) is replaced by the small failure for the next
// try.
func (route *Route) SettleUnsettled(ctx context.Context) int {
	settled := 0
	route.rt.unsettled.Range(func(k, v any) bool {
		id, u := k.(string), v.(unsettledOutcome)
		rec, err := route.rt.Store.Update(ctx, u.owner, id, func(rec *task.Task) error {
			ApplyOutcome(rec, u.result, u.err, Now())
			return nil
		})
		switch {
		case err == nil:
			settled++
			route.AuditOutcome(rec)
			route.rt.Hub.Changed(id)
			route.rt.unsettled.Delete(id)
		case outcomeSettled(err):
			route.rt.unsettled.Delete(id)
		case rpcerr.StoreUnavailable(err):
			if ce := route.log.Check(zap.DebugLevel, "the task store is still unavailable for an unsettled task"); ce != nil {
				ce.Write(zap.String("task", id), zap.Error(err))
			}
		default:
			route.log.Warn("recording the outcome of an unsettled task", zap.String("task", id), zap.Error(err))
			if u.result != nil || u.err == nil || u.err.Message != MsgOutcomeLost {
				route.rt.unsettled.Store(id, unsettledOutcome{owner: u.owner, err: outcomeLost()})
			}
		}
		return ctx.Err() == nil
	})
	return settled
}

// FailOrphans fails the tasks leased to this process, with the lease run
// out at now, that no worker of this process runs, and returns how many.
func (route *Route) FailOrphans(ctx context.Context, now time.Time) int {
	holder, failed, cursor := route.rt.Store.Holder(), 0, ""
	orphaned := func(t *task.Task) bool {
		_, running := route.rt.workers.get(t.ID)
		_, resuming := route.rt.resuming.Load(t.ID)
		_, unsettled := route.rt.unsettled.Load(t.ID) // its outcome waits to be written
		return !running && !resuming && !unsettled && t.Lease.Holder == holder && t.Lease.Expires.Before(now)
	}
	for {
		tasks, next, err := route.rt.Store.ListActive(ctx, cursor, 200)
		if err != nil {
			if ctx.Err() == nil {
				route.log.Warn("listing tasks for the orphan pass", zap.Error(err))
			}
			return failed
		}
		for _, t := range tasks {
			if !orphaned(t) {
				continue
			}
			// Checked again in the compare-and-set: a worker started
			// meanwhile renewed the lease first.
			rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
				if !orphaned(rec) {
					return errNoChange
				}
				ApplyOutcome(rec, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgWorkerLost), Now())
				return nil
			})
			switch {
			case err == nil:
				failed++
				route.log.Warn("failed a task whose worker was lost", zap.String("task", t.ID))
				route.AuditOutcome(rec)
				route.rt.Hub.Changed(t.ID)
			case !errors.Is(err, errNoChange) && !outcomeSettled(err):
				route.log.Warn("failing a task whose worker was lost", zap.String("task", t.ID), zap.Error(err))
			}
		}
		if next == "" {
			return failed
		}
		cursor = next
	}
}

// Unsettled reports whether task id waits for the orphan loop to record its
// failure (its worker could not store even that).
func (rt *Runtime) Unsettled(id string) bool {
	_, ok := rt.unsettled.Load(id)
	return ok
}
