package runtime

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Recovery after a restart. A task that is not terminal and whose lease no
// live worker holds is an orphan: the upstream call it was making died with
// the process that made it. By default the orphan fails, since the call's
// outcome is unknown; a tool declared retry_on_restart (idempotent) is run
// again from the stored request. A 2026-07-28 task waiting for tasks/update
// had no call in flight and simply waits on. Each task goes back through
// the route (handler instance) that created it, with that route's
// retry_on_restart list; an orphan whose route is gone fails. A task the
// upstream runs itself, whose id was recorded, is followed again there
// ([worker.workUpstreamTask]).

// MsgRestarted is the status message (and error) of a task whose call was
// lost in a restart.
const MsgRestarted = "gateway restarted while the call was running; the upstream result is unknown"

// MsgRerun is the status message of a task re-run after a restart.
const MsgRerun = "re-running the call after a gateway restart (the tool is declared retry_on_restart)"

// MsgRouteGone is the status message (and error) of an orphan whose route
// (the handler instance that created it) is no longer configured: nothing
// knows its next handler or whether its tool may run again.
const MsgRouteGone = "gateway restarted while the call was running, and the route that created the task is no longer configured; the upstream result is unknown"

// recovery says why orphans are recovered, in the status messages of the
// tasks: lost (the task fails, its outcome unknown), rerun (it runs again)
// and routeGone (it fails, its route not configured here).
type recovery struct{ lost, rerun, routeGone string }

// Recovered after this process restarted, or taken over from another
// replica that stopped ([takeoverLoop]): the messages say which.
var (
	afterRestart     = &recovery{lost: MsgRestarted, rerun: MsgRerun, routeGone: MsgRouteGone}
	afterReplicaStop = &recovery{lost: MsgReplicaLost, rerun: MsgReplicaRerun, routeGone: MsgReplicaRouteGone}
)

// recover takes over the orphans of the store, once per runtime, each
// through the route that created it.
func (rt *Runtime) recover() {
	ctx, holder := rt.ctx, rt.Store.Holder()
	cursor := ""
	for {
		tasks, next, err := rt.Store.ListActive(ctx, cursor, 200)
		if err != nil {
			if ctx.Err() == nil {
				if route := rt.routes.inCharge(); route != nil {
					route.log.Error("listing tasks to recover", zap.Error(err))
				}
			}
			return
		}
		for _, t := range tasks {
			if _, running := rt.workers.get(t.ID); running || t.Lease.Holder == holder {
				continue // started by this process
			}
			claimed, err := rt.Store.Acquire(ctx, t.Owner, t.ID, holder, Now(), rt.Leases.TTL())
			if err != nil {
				continue // a live worker elsewhere holds it, or it ended meanwhile
			}
			observeTakeover(rt, claimed, task.TakeoverRestart)
			rt.recoverTask(ctx, claimed, afterRestart)
		}
		if next == "" {
			return
		}
		cursor = next
	}
}

// recoverTask resumes or fails t, an orphan this process claimed; why says
// what happened to its worker.
func (rt *Runtime) recoverTask(ctx context.Context, t *task.Task, why *recovery) {
	route := rt.RouteFor(t.Route)
	switch {
	case route == nil:
		if route = rt.routes.inCharge(); route != nil { // its store and logs; the task fails
			route.failOrphan(ctx, t, why.routeGone)
		}
	case t.Era == task.Era2026 && t.Session != "" && t.UpstreamTaskID == "":
		// Bridged (the version bridge's call on the principal's 2025-11-25
		// upstream session, in the bridge package): its input and its outcome belonged to
		// an upstream call on a 2025-11-25 session, which died with the
		// process; answers would reach nothing. A bridged task the
		// upstream runs itself, whose id was recorded, lives on in the
		// upstream's session and is followed again below.
		route.failOrphan(ctx, t, why.lost)
	case t.UpstreamTask && t.UpstreamV2026 && t.UpstreamTaskID == "" && waitsBeforeV2026Task(t):
		// Input the upstream asked before making its task, the retry not
		// sent yet: the answers, given already or still to come, go as
		// the retry ([worker.v2026TaskOf]); no call was in flight.
		route.resume(t, nil, "", why)
	case t.Era == task.Era2026 && t.Status == task.StatusInputRequired && len(t.Outstanding()) > 0:
		route.resume(t, nil, "", why)
	case t.UpstreamTaskID != "": // the upstream's task lives on: follow it again
		route.resume(t, nil, "", why)
	case route.cfg.RetryOnRestart[t.Tool]:
		params, err := follow.UpstreamCallParams(t)
		if err != nil {
			route.failOrphan(ctx, t, why.lost)
			return
		}
		route.resume(t, params, why.rerun, why)
	default:
		route.failOrphan(ctx, t, why.lost)
	}
}

// failOrphan fails an orphan whose call's outcome is unknown.
func (route *Route) failOrphan(ctx context.Context, t *task.Task, message string) {
	rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.Error = jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", message)
		return rec.SetStatus(task.StatusFailed, message, Now())
	})
	if err == nil {
		route.AuditOutcome(rec)
		route.rt.Hub.Changed(t.ID)
	}
}

// resume restarts a worker for t once its route has served a request, whose
// next handler the work goes through (the glue's own, asked for at once
// when it can make one, basereq.go; else a client's): with params, a new attempt of the
// call; without, a wait for the client's input. The work runs under the
// route of that name started last by then. why is how it was recovered
// (recoverTask).
//
// While it waits its lease is renewed (renewResuming), for up to the
// route's ResumeWait: then the lease is released, so that a replica whose
// route serves requests takes the task over, and the task waits on here
// without it. Should this route serve first, the lease is taken again and
// the task recovered afresh from its record (another worker may have
// moved it on meanwhile); if another worker holds it, it is left to it.
func (route *Route) resume(t *task.Task, params []byte, message string, why *recovery) {
	rt, name := route.rt, route.cfg.Name
	b := rt.routes.base(name)
	b.awaiting.Store(true)
	rs := &resumingTask{owner: t.Owner, why: why, since: Now(), wait: route.cfg.ResumeWait}
	rt.resuming.Store(t.ID, rs) // not an orphan while it waits; its lease is renewed
	rt.loops.Go(func() {
		b.requests.ask(rt.ctx, route, t, b.ready)
		select {
		case <-b.ready:
		case <-rt.ctx.Done():
			rt.resuming.CompareAndDelete(t.ID, rs)
			return
		}
		if !rs.resume() { // its lease was released: take it again, if no one else did
			rec, err := rt.Store.Acquire(rt.ctx, t.Owner, t.ID, rt.Store.Holder(), Now(), rt.Leases.TTL())
			rt.resuming.CompareAndDelete(t.ID, rs)
			switch {
			case err == nil:
				rt.recoverTask(rt.ctx, rec, why)
			case !errors.Is(err, task.ErrLeaseHeld) && !outcomeSettled(err) && rt.ctx.Err() == nil:
				// Left released: another replica's takeover, or the
				// orphan scan, settles it.
				route.log.Warn("taking back the lease of a task to resume", zap.String("task", t.ID), zap.Error(err))
			}
			return
		}
		defer rt.resuming.CompareAndDelete(t.ID, rs)
		current := rt.RouteFor(name)
		if current == nil {
			current = route
		}
		run := current.NewRun(current.rerunBase(b.base.r, t), b.base.next)
		TraceRun(current, t, run) // before its first upstream call
		if params == nil {
			current.StartWorker(t, run, nil, nil)
			return
		}
		a, err := (&worker{route: current, t: t, run: run}).nextAttempt(params, message)
		if err != nil {
			run.Release()
			if !errors.Is(err, task.ErrTerminal) {
				current.Finish(t, nil, rpcerr.ClientError(current.log, "re-running after a restart", err, zap.String("task", t.ID)))
			}
			return
		}
		current.StartWorker(t, run, a, nil)
	})
}

// resumingTask is a recovered task waiting for its route to serve a
// request (resume). mu orders the release of its lease (renewResuming)
// against its resumption: once resumed, its lease is never released; once
// released, it resumes only by taking the lease again.
type resumingTask struct {
	owner string
	why   *recovery     // how it was recovered
	since time.Time     // when it started waiting
	wait  time.Duration // how long it waits holding its lease

	mu       sync.Mutex
	released bool
	resumed  bool
}

// resume marks the task resumed and reports whether it still holds its
// lease (false: the lease was released).
func (rs *resumingTask) resume() bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.resumed = !rs.released
	return rs.resumed
}

// rerunBase builds the request a re-run is made from: the context of a
// request the route served since the restart (Caddy's values, detached),
// with the task's own endpoint, host and routing headers. None of that
// caller's headers are kept: they are another client's.
func (route *Route) rerunBase(served *http.Request, t *task.Task) *http.Request {
	// The served request is another caller's: the re-run carries the
	// task's own caller, and Detach is told it is a re-run, so that the
	// glue drops that caller's connection and authentication state.
	ctx := task.RerunContext(served.Context(), task.Caller{Owner: t.Owner, Principal: t.Principal, Tenant: t.Tenant})
	base := route.cfg.Detach(served.WithContext(ctx))
	base.TLS = nil
	base.Header = http.Header{}
	for k, v := range t.Headers {
		base.Header.Set(k, v)
	}
	if t.Session != "" {
		base.Header.Set(upstream.HeaderSessionID, t.Session)
	}
	TaskCallHeaders(base.Header, t)
	taskEndpoint(base, t)
	return base
}

// RoutingHeaders keeps the headers of a request that a re-run must repeat:
// the MCP protocol and routing headers, never credentials.
func RoutingHeaders(r *http.Request) map[string]string {
	out := map[string]string{}
	for k, v := range r.Header {
		if len(v) == 0 {
			continue
		}
		switch k := http.CanonicalHeaderKey(k); {
		case k == upstream.HeaderProtocolVersion, upstream.IsRoutingHeader(k):
			out[k] = v[0]
		}
	}
	return out
}
