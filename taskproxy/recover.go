package taskproxy

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"
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
// (upstreamtask.go).

// msgRestarted is the status message (and error) of a task whose call was
// lost in a restart.
const msgRestarted = "gateway restarted while the call was running; the upstream result is unknown"

// msgRerun is the status message of a task re-run after a restart.
const msgRerun = "re-running the call after a gateway restart (the tool is declared retry_on_restart)"

// msgRouteGone is the status message (and error) of an orphan whose route
// (the handler instance that created it) is no longer configured: nothing
// knows its next handler or whether its tool may run again.
const msgRouteGone = "gateway restarted while the call was running, and the route that created the task is no longer configured; the upstream result is unknown"

// recover takes over the orphans of the store, once per runtime, each
// through the route that created it.
func (rt *Runtime) recover() {
	ctx, holder := rt.ctx, rt.Store.Holder()
	cursor := ""
	for {
		tasks, next, err := rt.Store.ListActive(ctx, cursor, 200)
		if err != nil {
			if ctx.Err() == nil {
				if g := rt.gateway.Load(); g != nil {
					g.log.Error("listing tasks to recover", zap.Error(err))
				}
			}
			return
		}
		for _, t := range tasks {
			if _, running := rt.workers.get(t.ID); running || t.Lease.Holder == holder {
				continue // started by this process
			}
			claimed, err := rt.Store.Acquire(ctx, t.Owner, t.ID, holder, clock(), leaseTTL)
			if err != nil {
				continue // a live worker elsewhere holds it, or it ended meanwhile
			}
			rt.recoverTask(ctx, claimed, msgRestarted)
		}
		if next == "" {
			return
		}
		cursor = next
	}
}

// recoverTask resumes or fails t, an orphan this process claimed; lost is
// why a task that cannot run again fails.
func (rt *Runtime) recoverTask(ctx context.Context, t *Task, lost string) {
	g := rt.gatewayFor(t.Route)
	switch {
	case g == nil:
		if g = rt.gateway.Load(); g != nil { // its store and logs; the task fails
			g.failOrphan(ctx, t, msgRouteGone)
		}
	case t.Era == EraModern && t.Session != "" && t.UpstreamTaskID == "":
		// Bridged (bridge_call.go): its input and its outcome belonged to
		// an upstream call on a 2025-11-25 session, which died with the
		// process; answers would reach nothing. A bridged task the
		// upstream runs itself, whose id was recorded, lives on in the
		// upstream's session and is followed again below (bridge_task.go).
		g.failOrphan(ctx, t, msgRestarted)
	case t.Era == EraModern && t.Status == StatusInputRequired && len(t.Outstanding()) > 0:
		g.resume(t, nil, "")
	case t.UpstreamTaskID != "": // the upstream's task lives on: follow it again
		g.resume(t, nil, "")
	case g.cfg.RetryOnRestart[t.Tool]:
		params := t.Params
		if t.UpstreamTask {
			var err error
			if params, err = upstreamTaskParams(t); err != nil {
				g.failOrphan(ctx, t, msgRestarted)
				return
			}
		}
		g.resume(t, params, msgRerun)
	default:
		g.failOrphan(ctx, t, lost)
	}
}

// failOrphan fails an orphan whose call's outcome is unknown.
func (g *Gateway) failOrphan(ctx context.Context, t *Task, message string) {
	rec, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *Task) error {
		rec.Error = Errorf(CodeInternalError, "%s", message)
		return rec.SetStatus(StatusFailed, message, clock())
	})
	if err == nil {
		g.auditOutcome(rec)
		g.rt.Hub.Changed(t.ID)
	}
}

// resume restarts a worker for t once its route has served a request, whose
// next handler the work goes through: with params, a new attempt of the
// call; without, a wait for the client's input. g is the route's gateway;
// the work runs under the route's gateway in charge by then.
func (g *Gateway) resume(t *Task, params []byte, message string) {
	rt := g.rt
	route := g.cfg.Route
	b := rt.routeBase(route)
	b.awaiting.Store(true)
	rt.resuming.Store(t.ID, t.Owner) // not an orphan while it waits; its lease is renewed
	rt.loops.Add(1)
	go func() {
		defer rt.loops.Done()
		defer rt.resuming.Delete(t.ID)
		select {
		case <-b.ready:
		case <-rt.ctx.Done():
			return
		}
		current := rt.gatewayFor(route)
		if current == nil {
			current = g
		}
		run := current.newRun(current.rerunBase(b.base.r, t), b.base.next)
		if params == nil {
			current.startWorker(t, run, nil, nil)
			return
		}
		a, err := current.nextAttempt(t, run, params, message)
		if err != nil {
			run.release()
			if !errors.Is(err, ErrTerminal) {
				current.finish(t, nil, current.clientError("re-running after a restart", err, zap.String("task", t.ID)))
			}
			return
		}
		current.startWorker(t, run, a, nil)
	}()
}

// rerunBase builds the request a re-run is made from: the context of a
// request the route served since the restart (Caddy's values, detached),
// with the task's own endpoint, host and routing headers. None of that
// caller's headers are kept: they are another client's.
func (g *Gateway) rerunBase(served *http.Request, t *Task) *http.Request {
	// The served request is another caller's: the re-run carries the
	// task's own caller, and Detach is told it is a re-run, so that the
	// glue drops that caller's connection and authentication state.
	ctx := RerunContext(served.Context(), Caller{Owner: t.Owner, Principal: t.Principal, Tenant: t.Tenant})
	base := g.cfg.Detach(served.WithContext(ctx))
	base.TLS = nil
	base.Header = http.Header{}
	for k, v := range t.Headers {
		base.Header.Set(k, v)
	}
	if t.Session != "" {
		base.Header.Set(headerSessionID, t.Session)
	}
	taskCallHeaders(base.Header, t)
	taskEndpoint(base, t)
	return base
}

// routingHeaders keeps the headers of a request that a re-run must repeat:
// the MCP protocol and routing headers, never credentials.
func routingHeaders(r *http.Request) map[string]string {
	out := map[string]string{}
	for k, v := range r.Header {
		if len(v) == 0 {
			continue
		}
		switch k := http.CanonicalHeaderKey(k); {
		case k == headerProtocolVersion, k == headerMethod, k == headerName, strings.HasPrefix(k, "Mcp-Param-"):
			out[k] = v[0]
		}
	}
	return out
}
