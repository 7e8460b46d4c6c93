package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Task-aware upstreams. For a tool the upstream runs as a task itself
// (internal/wire/tools.go), the gateway still owns the client's task (durable,
// bound to its owner, on either wire) and its worker is a 2025-11-25 task
// client of the upstream: it sends the tools/call with params.task, records
// the upstream's task id, follows it with tasks/result (which blocks, and
// carries the upstream's input requests, Relayed into the task's own input
// requests) while polling tasks/get for its status message, maps the
// task's cancellation and expiry to the upstream's tasks/cancel, and takes
// the upstream's outcome as the task's. A restart resumes following by the
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
	stopPolling := w.pollUpstreamStatus()
	defer stopPolling()
	w.followUpstreamTask()
}

// createUpstreamTask reads the answer of the creating call and records the
// upstream's task id. It returns false when the task ended instead: the
// upstream answered with an error or a plain result (a server that does
// not take tasks for the call runs it normally), or the task ended
// meanwhile, in which case the upstream's task is cancelled.
func (w *worker) createUpstreamTask(a *upstream.Attempt) (string, bool) {
	route, t, run := w.route, w.t, w.run
	ev := w.followEvents(a)
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
	var created struct {
		Task *struct {
			TaskID        string `json:"taskId"`
			StatusMessage string `json:"statusMessage"`
		} `json:"task"`
	}
	if json.Unmarshal(ev.Final.Result, &created) != nil || created.Task == nil || created.Task.TaskID == "" {
		route.Finish(t, BridgedResult(t, ev.Final.Result), nil)
		return "", false
	}
	id := created.Task.TaskID
	// Published before the record: a cancellation that finds the record
	// still working then finds the id too (cancelTask reads it after
	// storing the cancellation), and one that stored first makes the
	// update below fail, and the upstream's task is cancelled here.
	run.setUpstreamTask(id)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.Ctx), 10*time.Second)
	defer cancel()
	rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.UpstreamTaskID = id
		if m := created.Task.StatusMessage; m != "" && rec.Status == task.StatusWorking {
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

// followEvents consumes an attempt's events up to its last one: the
// upstream's requests become the task's input requests, status
// notifications of its task update the status message.
func (w *worker) followEvents(a *upstream.Attempt) *upstream.Event {
	run := w.run
	ev, _ := a.Until(run.Ctx, nil, func(ev upstream.Event) bool {
		switch {
		case ev.Request != nil:
			w.upstreamRequest(ev.Request)
		case ev.Notification.Method == "notifications/tasks/status":
			w.mirrorUpstreamStatus(run.Ctx, ev.Notification.Params)
		}
		return false
	})
	return &ev
}

// followUpstreamTask waits for the upstream task's outcome with tasks/result
// and records it. A tasks/result that ends without an answer is asked
// again, as long as the upstream still knows the task.
func (w *worker) followUpstreamTask() {
	route, t, run := w.route, w.t, w.run
	failures := 0
	for n := 1; ; n++ {
		id := follow.FollowID(t.ID, "result", n)
		body, err := jsonrpc.RequestBytes(id, "tasks/result", map[string]string{"taskId": t.UpstreamTaskID})
		if err != nil {
			route.Finish(t, nil, rpcerr.InternalError(route.log, "encoding tasks/result", err, zap.String("task", t.ID)))
			return
		}
		ev := w.followEvents(upstream.StartAttempt(run.Ctx, run.Base, run.Next, id, body))
		if run.Ctx.Err() != nil {
			route.finishInterrupted(run.Ctx, t, context.Cause(run.Ctx))
			return
		}
		if ev.Err == nil && ev.Final.Error == nil {
			route.Finish(t, BridgedResult(t, follow.WithoutRelatedTask(ev.Final.Result)), nil)
			return
		}
		status, known, err := w.upstreamTaskStatus(n)
		switch {
		case err == nil && !known:
			route.Finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, follow.MsgUpstreamTaskGone, t.UpstreamTaskID))
			return
		case err == nil && status.Terminal() && ev.Err == nil:
			route.Finish(t, nil, ev.Final.Error) // the upstream's outcome is an error
			return
		}
		if failures++; failures > follow.MaxFollowFailures {
			cause := ev.Err
			if cause == nil {
				cause = fmt.Errorf("tasks/result: %s", ev.Final.Error.Message)
			}
			route.finishInterrupted(run.Ctx, t, fmt.Errorf("following the upstream's task %s: %w", t.UpstreamTaskID, cause))
			return
		}
		select {
		case <-time.After(max(t.PollInterval, 500*time.Millisecond)):
		case <-run.Ctx.Done():
			route.finishInterrupted(run.Ctx, t, context.Cause(run.Ctx))
			return
		}
	}
}

// upstreamTaskStatus asks the upstream for its task (tasks/get): its
// status, or known false when the upstream answers that it has no such task.
func (w *worker) upstreamTaskStatus(n int) (task.Status, bool, error) {
	t, run := w.t, w.run
	ctx, cancel := context.WithTimeout(run.Ctx, 30*time.Second)
	defer cancel()
	answer, err := upstream.Request(ctx, run.Base, run.Next, t.Session, follow.FollowID(t.ID, "get", n), "tasks/get", map[string]string{"taskId": t.UpstreamTaskID})
	if err != nil {
		return "", false, err
	}
	if answer.Error != nil {
		if answer.Error.Code == jsonrpc.CodeInvalidParams {
			return "", false, nil
		}
		return "", false, fmt.Errorf("tasks/get: %s", answer.Error.Message)
	}
	var tk struct {
		Status        task.Status `json:"status"`
		StatusMessage string      `json:"statusMessage"`
	}
	if err := json.Unmarshal(answer.Result, &tk); err != nil {
		return "", false, fmt.Errorf("reading tasks/get: %w", err)
	}
	return tk.Status, true, nil
}

// pollUpstreamStatus polls the upstream's tasks/get at the task's poll
// interval while tasks/result blocks, mirroring the upstream's status
// message into the task (the only way to see "Analyzing content…" from a
// server that sends no status notifications). It returns the stop.
func (w *worker) pollUpstreamStatus() func() {
	t, run := w.t, w.run
	ctx, cancel := context.WithCancel(run.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := max(t.PollInterval, time.Second)
		for n := 1; ; n++ {
			select {
			case <-time.After(every):
			case <-ctx.Done():
				return
			}
			answer, err := upstream.Request(ctx, run.Base, run.Next, t.Session, follow.FollowID(t.ID, "poll", n), "tasks/get", map[string]string{"taskId": t.UpstreamTaskID})
			if err != nil || answer.Error != nil {
				continue // tasks/result's follow-up decides what a failure means
			}
			w.mirrorUpstreamStatus(ctx, answer.Result)
		}
	}()
	return func() {
		cancel()
		<-done
	}
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

// cancelUpstreamTask sends the upstream tasks/cancel for its task id, on
// the task's session. Cancelling a task the upstream already ended is
// refused by it (-32602), which changes nothing here.
func (route *Route) cancelUpstreamTask(ctx context.Context, run *Run, t *task.Task, upstreamTaskID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	id, params := follow.FollowID(t.ID, "cancel", 1), map[string]any{"taskId": upstreamTaskID}
	var answer *jsonrpc.Message
	var err error
	if t.UpstreamV2026 { // with the 2026-07-28 headers and _meta (follow.V2026UpstreamRequest)
		answer, err = follow.V2026UpstreamRequest(ctx, run.Base, run.Next, t.Params, id, "tasks/cancel", params)
	} else {
		answer, err = upstream.Request(ctx, run.Base, run.Next, t.Session, id, "tasks/cancel", params)
	}
	switch {
	case err != nil:
		route.log.Warn("cancelling the upstream's task", zap.String("task", t.ID), zap.String("upstream_task", upstreamTaskID), zap.Error(err))
	case answer.Error != nil:
		if ce := route.log.Check(zap.DebugLevel, "upstream refused tasks/cancel"); ce != nil {
			ce.Write(zap.String("task", t.ID), zap.String("upstream_task", upstreamTaskID), zap.String("error", answer.Error.Message))
		}
	}
}

// stopUpstreamCall tells the upstream that a task's call is to stop:
// tasks/cancel of its own task when it runs one, else, on 2025-11-25,
// notifications/cancelled of the call (on 2026-07-28 closing the call's
// stream is the cancellation).
func (route *Route) stopUpstreamCall(ctx context.Context, run *Run, t *task.Task, reason string) {
	if id := run.upstreamTask(); id != "" {
		route.cancelUpstreamTask(ctx, run, t, id)
		return
	}
	if UpstreamSpeaksV2025(t) { // on 2026-07-28 closing the stream is the cancellation
		route.NotifyUpstreamCancelled(ctx, run, t, reason)
	}
}
