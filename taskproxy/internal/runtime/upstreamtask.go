package runtime

import (
	"context"
	"encoding/json"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Task-aware upstreams. For a tool the upstream runs as a task itself
// (the wire's UpstreamCaps learns which), the gateway still owns the client's task (durable,
// bound to its owner, on either wire) and its worker is a 2025-11-25 task
// client of the upstream: it sends the tools/call with params.task, records
// the upstream's task id, follows it with tasks/result (which blocks, and
// carries the upstream's input requests, Relayed into the task's own input
// requests) while polling tasks/get for its status message, maps the
// task's cancellation and expiry to the upstream's tasks/cancel (also
// when they come before the upstream's CreateTaskResult: the answer is
// read on, see pendingcreate.go), and takes the upstream's outcome as the
// task's. A restart resumes following by the
// recorded id; an upstream that no longer knows it fails the task with why.

// workUpstreamTask runs a task the upstream runs: a is the creating call in
// flight, nil when a worker resumes following after a restart.
func (w *worker) workUpstreamTask(a *upstream.Attempt) {
	route, t, run := w.route, w.t, w.run
	if t.UpstreamTaskID == "" {
		if a == nil { // nothing to follow: recovery does not resume these
			route.Finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgRestarted))
			return
		}
		id, ok := w.createUpstreamTask(a)
		if !ok {
			return
		}
		t.UpstreamTaskID = id
	} else {
		run.setUpstreamTask(t.UpstreamTaskID)
		// Resumed: a cancellation stored while no worker ran never
		// reached the upstream.
		if rec, err := route.rt.Store.Get(run.Ctx, t.Owner, t.ID); err == nil && rec.Status == task.StatusCancelled {
			route.cancelUpstreamTask(run.Ctx, run, t, t.UpstreamTaskID)
			return
		}
	}
	followed{w}.loop().V2025(run.Ctx, followed{w})
}

// createUpstreamTask reads the answer of the creating call and records the
// upstream's task id. It returns false when the task ended instead: the
// upstream answered with an error or a plain result (a server that does
// not take tasks for the call runs it normally), or the task ended
// meanwhile. The answer is then read on, as on 2026-07-28, through
// [Run.readCreate]: the task it names is cancelled with tasks/cancel.
func (w *worker) createUpstreamTask(a *upstream.Attempt) (string, bool) {
	route, t, run := w.route, w.t, w.run
	ev, ok := run.readCreate(route, t, func() *upstream.Event { return follow.Events(run.Ctx, a, followed{w}) })
	if !ok {
		return "", false
	}
	switch {
	case ev.Err != nil:
		route.finishInterrupted(run.Ctx, t, ev.Err)
		return "", false
	case route.sessionLost(t, ev):
		route.Finish(t, nil, sessionLostError(t))
		return "", false
	case ev.Final.Error != nil:
		route.Finish(t, nil, ev.Final.Error)
		return "", false
	}
	created, ok := follow.ReadV2025Created(ev.Final.Result)
	if !ok {
		route.Finish(t, BridgedResult(t, ev.Final.Result), nil)
		return "", false
	}
	id := created.TaskID
	// Published before the record: a cancellation that finds the record
	// still working then finds the id too (cancelTask reads it after
	// storing the cancellation), and one that stored first makes the
	// update below fail, and the upstream's task is cancelled here.
	run.setUpstreamTask(id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.Ctx), 10*time.Second)
	defer cancel()
	rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.UpstreamTaskID = id
		if m := created.StatusMessage; m != "" && rec.Status == task.StatusWorking {
			rec.StatusMessage, rec.UpdatedAt = follow.UpstreamStatusMessage(m), Now()
		}
		return nil
	})
	if err != nil {
		// The upstream's task must not run on untracked.
		route.cancelUpstreamTask(ctx, run, t, id)
		if !outcomeSettled(err) {
			route.Finish(t, nil, rpcerr.InternalError(route.log, "recording the upstream's task id", err, zap.String("task", t.ID)))
		}
		return "", false
	}
	if ce := route.log.Check(zap.DebugLevel, "following the upstream's task"); ce != nil {
		ce.Write(zap.String("task", t.ID), zap.String("upstream_task", id))
	}
	route.AuditTask(auditUpstreamTask, rec)
	route.rt.Hub.Changed(t.ID)
	return id, true
}

// auditUpstreamTask is the audit event of a task the upstream runs.
const auditUpstreamTask = "task created at the upstream"

// followed is the worker's task as the follow loops see it
// (follow.V2026Tracker): they read the upstream's task, it records what
// they read.
type followed struct{ w *worker }

// loop is the follow loop of the worker's task.
func (f followed) loop() follow.Loop {
	return follow.Loop{Task: f.w.t, Base: f.w.run.Base, Next: f.w.run.Next, Log: f.w.route.log}
}

// Finish records the upstream task's outcome, its result as the task's
// client takes it: a 2026-07-28 upstream's for the task's era, a
// 2025-11-25 upstream's with the 2026-07-28 fields when the task is
// bridged.
func (f followed) Finish(result json.RawMessage, rpcErr *jsonrpc.Error) {
	t := f.w.t
	if rpcErr == nil {
		if t.UpstreamV2026 {
			result = follow.V2026ResultFor(t, result)
		} else {
			result = BridgedResult(t, result)
		}
	}
	f.w.route.Finish(t, result, rpcErr)
}

// Interrupt records that following ended without an outcome.
func (f followed) Interrupt(cause error) { f.w.route.finishInterrupted(f.w.run.Ctx, f.w.t, cause) }

// Status mirrors the upstream task's status message into the task.
func (f followed) Status(ctx context.Context, upstreamTask json.RawMessage) {
	f.w.mirrorUpstreamStatus(ctx, upstreamTask)
}

// Request takes a request of the upstream's as the task's input request.
func (f followed) Request(m *jsonrpc.Message) { f.w.upstreamRequest(m) }

// Inputs records a 2026-07-28 upstream task's input requests.
func (f followed) Inputs(requests map[string]json.RawMessage) { f.w.recordV2026Inputs(requests) }

// Answers returns the client's answers to the upstream's input requests
// not in sent, by the upstream's keys, as the store holds them; none once
// the task has ended, or when the store cannot say.
func (f followed) Answers(ctx context.Context, sent map[string]bool) map[string]json.RawMessage {
	t := f.w.t
	rec, err := f.w.route.rt.Store.Get(ctx, t.Owner, t.ID)
	if err != nil || rec.Status.Terminal() {
		return nil
	}
	responses := map[string]json.RawMessage{}
	for _, in := range rec.Inputs {
		if in.UpstreamKey != "" && in.Answered && !sent[in.UpstreamKey] && in.Response != nil {
			responses[in.UpstreamKey] = in.Response
		}
	}
	return responses
}

// mirrorUpstreamStatus copies the status message of the upstream's task (a
// Task object) into the task while it is working; the status itself
// follows from what the worker sees (input requests, the outcome).
func (w *worker) mirrorUpstreamStatus(ctx context.Context, upstreamTask json.RawMessage) {
	t := w.t
	var up struct {
		TaskID        string `json:"taskId"`
		StatusMessage string `json:"statusMessage"`
	}
	if json.Unmarshal(upstreamTask, &up) != nil || up.TaskID != t.UpstreamTaskID || up.StatusMessage == "" {
		return
	}
	if message := follow.UpstreamStatusMessage(up.StatusMessage); w.mirrored.admit(message, time.Now()) {
		w.setWorkingMessage(ctx, message)
	}
}

// setWorkingMessage sets the status message of the task while it is
// working, and wakes its waiters.
func (w *worker) setWorkingMessage(ctx context.Context, message string) {
	route, t := w.route, w.t
	_, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		if rec.Status != task.StatusWorking || rec.StatusMessage == message {
			return errNoChange
		}
		rec.StatusMessage, rec.UpdatedAt = message, Now()
		return nil
	})
	if err == nil {
		route.rt.Hub.Changed(t.ID)
	}
}

// cancelUpstreamTask sends the upstream tasks/cancel for its task id
// (follow.Loop.Cancel).
func (route *Route) cancelUpstreamTask(ctx context.Context, run *Run, t *task.Task, upstreamTaskID string) {
	follow.Loop{Task: t, Base: run.Base, Next: run.Next, Log: route.log}.Cancel(ctx, upstreamTaskID)
}

// stopUpstreamCall tells the upstream that a task's call is to stop:
// tasks/cancel of its own task when it runs one, else, on 2025-11-25,
// notifications/cancelled of the call (on 2026-07-28 closing the call's
// stream is the cancellation).
//
// A 2025-11-25 call with params.task whose CreateTaskResult has not come
// yet gets no notifications/cancelled: the spec says it MUST NOT be used
// for tasks, only tasks/cancel, and a server that made its task already
// would not stop it for one. The call is read on instead ([Run.readCreate],
// or the record's update that fails on the ended task, see
// createUpstreamTask) and the task its answer names gets tasks/cancel; a
// server that answers with a plain result ran the call to its end, and
// one that does not answer within follow.CreateGrace has its stream closed.
func (route *Route) stopUpstreamCall(ctx context.Context, run *Run, t *task.Task, reason string) {
	if id := run.upstreamTask(); id != "" {
		route.cancelUpstreamTask(ctx, run, t, id)
		return
	}
	if UpstreamSpeaksV2025(t) && !t.UpstreamTask { // on 2026-07-28 closing the stream is the cancellation
		route.NotifyUpstreamCancelled(ctx, run, t, reason)
	}
}
