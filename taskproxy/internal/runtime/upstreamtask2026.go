package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Task-aware 2026-07-28 upstreams (the io.modelcontextprotocol/tasks
// extension). The upstream answers a tools/call that declares the
// extension with a CreateTaskResult; the gateway's task mirrors that task.
// There is no tasks/result on this wire: the worker polls the upstream's
// tasks/get (with Mcp-Name, at the upstream's pollIntervalMs within
// bounds), copies status, statusMessage, result and error, records the
// upstream's inputRequests as the task's own (under the gateway's keys)
// and sends the client's answers with the upstream's tasks/update, under
// the upstream's keys. The task's cancellation and expiry send tasks/cancel.
// The upstream task's id is recorded, so a restart follows it again.

// workV2026UpstreamTask runs a task the 2026-07-28 upstream runs: a is the
// call in flight when the task was made before the upstream answered
// (task_after passed), pending the call's answer when it was taken before
// the task (input asked before the upstream's task, which the gateway
// could not record), both nil when the upstream's task id is already
// known (recorded at creation, or resumed after a restart) or the task
// waits for input asked before the upstream's task.
func (w *worker) workV2026UpstreamTask(a *upstream.Attempt, pending *upstream.Event) {
	route, t, run := w.route, w.t, w.run
	if t.UpstreamTaskID == "" {
		ev := pending
		if a == nil && ev == nil {
			if !waitsBeforeV2026Task(t) {
				route.Finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgRestarted))
				return
			}
			// Waiting for input asked before the upstream's task (the
			// task was made so, or is resumed after a restart): the
			// answers go as the call's retry.
			var err error
			if a, err = w.retryWithAnswers(t.RoundInputs()); err != nil {
				route.finishInterrupted(run.Ctx, t, err)
				return
			}
		}
		if ev == nil {
			var ok bool
			if ev, ok = run.readCreate(route, t, func() *upstream.Event { return follow.Events(run.Ctx, a, followed{w}) }); !ok {
				return
			}
		}
		created, ok := w.v2026TaskOf(ev) // input asked before the task
		if !ok {
			return
		}
		if !w.recordV2026UpstreamTask(created) {
			return
		}
	} else {
		run.setUpstreamTask(t.UpstreamTaskID)
		if rec, err := route.rt.Store.Get(run.Ctx, t.Owner, t.ID); err == nil && rec.Status == task.StatusCancelled {
			route.cancelUpstreamTask(run.Ctx, run, t, t.UpstreamTaskID)
			return
		}
	}
	sub := route.rt.Hub.Subscribe(t.ID)
	defer sub.Close()
	followed{w}.loop().V2026(run.Ctx, sub.Changed, followed{w})
}

// recordV2026UpstreamTask records the id of the upstream's task, created
// after the gateway's own; false means the task ended instead.
func (w *worker) recordV2026UpstreamTask(created follow.V2026Created) bool {
	route, t, run := w.route, w.t, w.run
	follow.LogOddNumber(route.log, "CreateTaskResult", created.TaskID, "pollIntervalMs", created.PollIntervalErr)
	run.setUpstreamTask(created.TaskID) // before the record: see createUpstreamTask
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.Ctx), 10*time.Second)
	defer cancel()
	rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.UpstreamTask, rec.UpstreamV2026, rec.UpstreamTaskID = true, true, created.TaskID
		if m := created.StatusMessage; m != "" && rec.Status == task.StatusWorking {
			rec.StatusMessage, rec.UpdatedAt = follow.UpstreamStatusMessage(m), Now()
		}
		return nil
	})
	if err != nil {
		route.cancelUpstreamTask(ctx, run, t, created.TaskID)
		if !outcomeSettled(err) {
			route.Finish(t, nil, rpcerr.InternalError(route.log, "recording the upstream's task id", err, zap.String("task", t.ID)))
		}
		return false
	}
	t.UpstreamTaskID = created.TaskID
	route.AuditTask(auditUpstreamTask, rec)
	route.rt.Hub.Changed(t.ID)
	return true
}

// recordV2026Inputs records the upstream's outstanding input requests the
// task does not hold yet under fresh keys of its own, and puts the task in
// input_required while any of them is unanswered. The upstream never reuses
// a key within a task, so its key identifies the request.
func (w *worker) recordV2026Inputs(requests map[string]json.RawMessage) {
	route, t, run := w.route, w.t, w.run
	type upstreamInput struct {
		key    string
		method string
		params json.RawMessage
	}
	var inputs []upstreamInput
	for k, raw := range requests {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(raw, &req) != nil || req.Method == "" {
			route.log.Warn("ignoring a malformed upstream input request", zap.String("task", t.ID), zap.String("key", k))
			continue
		}
		inputs = append(inputs, upstreamInput{k, req.Method, req.Params})
	}
	rec, err := route.rt.Store.Update(run.Ctx, t.Owner, t.ID, func(rec *task.Task) error {
		held := make(map[string]*task.InputRequest, len(rec.Inputs))
		for i := range rec.Inputs {
			if k := rec.Inputs[i].UpstreamKey; k != "" {
				held[k] = &rec.Inputs[i]
			}
		}
		waiting, changed := false, false
		for _, in := range inputs {
			have, ok := held[in.key]
			if !ok {
				if len(rec.Inputs) >= MaxTaskInputs {
					return fmt.Errorf("the upstream asked for input more than %d times", MaxTaskInputs)
				}
				rec.AddInput(task.InputRequest{Method: in.method, Params: in.params, UpstreamKey: in.key, Round: rec.Round})
				waiting, changed = true, true
				continue
			}
			waiting = waiting || !have.Answered
		}
		if waiting && rec.Status != task.StatusInputRequired {
			changed = true
			if err := rec.SetStatus(task.StatusInputRequired, InputMessage(rec.Era), Now()); err != nil {
				return err
			}
		}
		if !changed {
			return errNoChange
		}
		rec.UpdatedAt = Now()
		return nil
	})
	switch {
	case err == nil:
		route.AuditTask(AuditInputRequired, rec)
		route.rt.Hub.Changed(t.ID)
	case !errors.Is(err, errNoChange) && run.Ctx.Err() == nil:
		route.log.Warn("recording the upstream's input requests", zap.String("task", t.ID), zap.Error(err))
	}
}
