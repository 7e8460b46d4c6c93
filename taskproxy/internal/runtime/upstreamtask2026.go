package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
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

// Bounds on the poll interval of a followed 2026-07-28 task: the
// upstream's pollIntervalMs is honoured within them, so that an upstream
// asking for 1 ms polls is not hammered, and one asking for an hour is
// still seen to end.
const (
	minV2026Poll = 50 * time.Millisecond
	maxV2026Poll = 10 * time.Second
)

// V2026Created is what the gateway reads of an upstream CreateTaskResult.
type V2026Created struct {
	TaskID        string
	Status        task.Status
	StatusMessage string
	// PollIntervalMs is the upstream's pollIntervalMs, read as JSON Schema
	// reads an integer (5000.0 is 5000); 0 when absent or not an integer,
	// the largest int64 when beyond it.
	PollIntervalMs int64
	// PollIntervalErr says why PollIntervalMs is not what the upstream
	// sent (ignored or clamped), for a debug log; nil when it is.
	PollIntervalErr error
}

// ReadV2026Created reads a 2026-07-28 CreateTaskResult (resultType "task"
// with a taskId); ok is false for any other answer. A pollIntervalMs that
// is not an integer never makes it fail: the task is followed all the same.
func ReadV2026Created(result json.RawMessage) (V2026Created, bool) {
	var c struct {
		ResultType     string               `json:"resultType"`
		TaskID         string               `json:"taskId"`
		Status         task.Status          `json:"status"`
		StatusMessage  string               `json:"statusMessage"`
		PollIntervalMs jsonx.LenientInteger `json:"pollIntervalMs"`
	}
	if len(result) == 0 || json.Unmarshal(result, &c) != nil || c.ResultType != "task" || c.TaskID == "" {
		return V2026Created{}, false
	}
	return V2026Created{TaskID: c.TaskID, Status: c.Status, StatusMessage: c.StatusMessage,
		PollIntervalMs: c.PollIntervalMs.Value, PollIntervalErr: c.PollIntervalMs.Err}, true
}

// logOddNumber notes at debug level a number of an upstream's answer that
// was clamped or ignored (err says which and why; nil logs nothing).
func logOddNumber(log *zap.Logger, answer, upstreamTask, field string, err error) {
	if err != nil && log != nil {
		log.Debug("a number of the upstream's answer is not a 64-bit integer; clamped or ignored",
			zap.String("answer", answer), zap.String("upstream_task", upstreamTask), zap.String("field", field), zap.Error(err))
	}
}

// v2026UpstreamTask is what the worker reads of the upstream's tasks/get.
type v2026UpstreamTask struct {
	TaskID         string                     `json:"taskId"`
	Status         task.Status                `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	PollIntervalMs jsonx.LenientInteger       `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage            `json:"result"`
	Error          *jsonrpc.Error             `json:"error"`
}

// readV2026UpstreamTask decodes the upstream's tasks/get result; its
// numbers as ReadV2026Created reads them.
func readV2026UpstreamTask(result json.RawMessage, log *zap.Logger) (v2026UpstreamTask, error) {
	var up v2026UpstreamTask
	if err := json.Unmarshal(result, &up); err != nil {
		return v2026UpstreamTask{}, fmt.Errorf("reading tasks/get: %w", err)
	}
	logOddNumber(log, "tasks/get", up.TaskID, "pollIntervalMs", up.PollIntervalMs.Err)
	return up, nil
}

// pollEvery is how often to poll an upstream that asks for ms between
// polls (0: it did not say), within the bounds: clamped as milliseconds,
// before a huge value could overflow a time.Duration.
func pollEvery(ms int64) time.Duration {
	return clampV2026Poll(time.Duration(min(max(ms, 0), maxV2026Poll.Milliseconds())) * time.Millisecond)
}

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
			if ev, ok = run.readCreate(route, t, func() *upstream.Event { return w.followEvents(a) }); !ok {
				return
			}
		}
		created, ok := w.v2026TaskOf(ev) // input asked before the task: upstreamtask2026_input.go
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
	w.followV2026UpstreamTask()
}

// recordV2026UpstreamTask records the id of the upstream's task, created
// after the gateway's own; false means the task ended instead.
func (w *worker) recordV2026UpstreamTask(created V2026Created) bool {
	route, t, run := w.route, w.t, w.run
	logOddNumber(route.log, "CreateTaskResult", created.TaskID, "pollIntervalMs", created.PollIntervalErr)
	run.setUpstreamTask(created.TaskID) // before the record: see createUpstreamTask
	ctx, cancel := context.WithTimeout(context.WithoutCancel(run.Ctx), 10*time.Second)
	defer cancel()
	rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.UpstreamTask, rec.UpstreamV2026, rec.UpstreamTaskID = true, true, created.TaskID
		if m := created.StatusMessage; m != "" && rec.Status == task.StatusWorking {
			rec.StatusMessage, rec.UpdatedAt = UpstreamStatusMessage(m), Now()
		}
		return nil
	})
	if err != nil {
		route.cancelUpstreamTask(ctx, run, t, created.TaskID)
		if !outcomeSettled(err) {
			route.Finish(t, nil, InternalError(route.log, "recording the upstream's task id", err, zap.String("task", t.ID)))
		}
		return false
	}
	t.UpstreamTaskID = created.TaskID
	route.AuditTask(auditUpstreamTask, rec)
	route.rt.Hub.Changed(t.ID)
	return true
}

// followV2026UpstreamTask polls the upstream's task until it ends, and
// sends the client's answers on as soon as they are given.
func (w *worker) followV2026UpstreamTask() {
	route, t, run := w.route, w.t, w.run
	sub := route.rt.Hub.Subscribe(t.ID)
	defer sub.Close()
	every := clampV2026Poll(t.PollInterval)
	sent := map[string]bool{} // upstream keys whose answers went out
	failures := 0
	for n := 1; ; n++ {
		if w.sendV2026Answers(n, sent) {
			continue // answers went out: see what the upstream made of them
		}
		up, known, err := w.getV2026UpstreamTask(n)
		if run.Ctx.Err() != nil {
			route.finishInterrupted(run.Ctx, t, context.Cause(run.Ctx))
			return
		}
		switch {
		case err != nil:
			if failures++; failures > maxFollowFailures {
				route.finishInterrupted(run.Ctx, t, fmt.Errorf("following the upstream's task %s: %w", t.UpstreamTaskID, err))
				return
			}
		case !known:
			route.Finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, msgUpstreamTaskGone, t.UpstreamTaskID))
			return
		default:
			failures = 0
			if up.PollIntervalMs.Value > 0 {
				every = pollEvery(up.PollIntervalMs.Value)
			}
			if w.mirrorV2026UpstreamTask(up) {
				return
			}
		}
		timer := time.NewTimer(every)
		select {
		case <-timer.C:
		case <-sub.Changed: // an answer, perhaps: sent at the loop's start
		case <-run.Ctx.Done():
			timer.Stop()
			route.finishInterrupted(run.Ctx, t, context.Cause(run.Ctx))
			return
		}
		timer.Stop()
	}
}

// v2026ResultFor is a 2026-07-28 upstream's result as t's client takes
// it: a 2025-11-25 task's (the reverse version bridge's) without the
// 2026-07-28 fields, any other as the upstream wrote it.
func v2026ResultFor(t *task.Task, result json.RawMessage) json.RawMessage {
	if t.Era == task.Era2025 {
		return translate.V2025Result(result)
	}
	return result
}

func clampV2026Poll(d time.Duration) time.Duration { return min(max(d, minV2026Poll), maxV2026Poll) }

// mirrorV2026UpstreamTask copies one tasks/get answer into the task; it
// returns true once the task has ended.
func (w *worker) mirrorV2026UpstreamTask(up v2026UpstreamTask) bool {
	route, t, run := w.route, w.t, w.run
	switch up.Status {
	case task.StatusCompleted:
		result := up.Result
		if result == nil {
			result = json.RawMessage("{}")
		}
		route.Finish(t, v2026ResultFor(t, result), nil)
		return true
	case task.StatusFailed:
		e := up.Error
		if e == nil {
			e = jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream's task failed: %s", UpstreamStatusMessage(up.StatusMessage))
		}
		route.Finish(t, nil, e)
		return true
	case task.StatusCancelled:
		// Cancelled upstream, not by this task's client (that cancel is
		// recorded first and ends the worker).
		msg := "the upstream cancelled its task"
		if up.StatusMessage != "" {
			msg += ": " + UpstreamStatusMessage(up.StatusMessage)
		}
		route.Finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", msg))
		return true
	case task.StatusInputRequired:
		w.recordV2026Inputs(up.InputRequests)
	case task.StatusWorking:
		if up.StatusMessage != "" {
			w.mirrorUpstreamStatus(run.Ctx, mustJSON(map[string]string{"taskId": t.UpstreamTaskID, "statusMessage": up.StatusMessage}))
		}
	}
	return false
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
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
	case err != errNoChange && run.Ctx.Err() == nil:
		route.log.Warn("recording the upstream's input requests", zap.String("task", t.ID), zap.Error(err))
	}
}

// sendV2026Answers sends the upstream, with one tasks/update, the client's
// answers not sent yet (a partial set too: the upstream keeps it), under
// the upstream's keys. It reports whether it sent any. After a restart,
// answers already sent go again; the upstream ignores answers to keys no
// longer outstanding.
func (w *worker) sendV2026Answers(n int, sent map[string]bool) bool {
	route, t, run := w.route, w.t, w.run
	rec, err := route.rt.Store.Get(run.Ctx, t.Owner, t.ID)
	if err != nil || rec.Status.Terminal() {
		return false
	}
	responses := map[string]json.RawMessage{}
	for _, in := range rec.Inputs {
		if in.UpstreamKey != "" && in.Answered && !sent[in.UpstreamKey] && in.Response != nil {
			responses[in.UpstreamKey] = in.Response
		}
	}
	if len(responses) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(run.Ctx, 30*time.Second)
	defer cancel()
	answer, err := w.v2026Request(ctx, followID(t.ID, "update", n), "tasks/update", map[string]any{"taskId": t.UpstreamTaskID, "inputResponses": responses})
	if err != nil || answer.Error != nil {
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			msg = answer.Error.Message
		}
		route.log.Warn("sending answers to the upstream's task", zap.String("task", t.ID), zap.String("upstream_task", t.UpstreamTaskID), zap.String("error", msg))
		return false // the next tasks/get decides; the answers go again
	}
	for k := range responses {
		sent[k] = true
	}
	return true
}

// getV2026UpstreamTask asks the upstream for its task: known is false when
// the upstream answers that it has no such task (-32602).
func (w *worker) getV2026UpstreamTask(n int) (v2026UpstreamTask, bool, error) {
	t, run := w.t, w.run
	ctx, cancel := context.WithTimeout(run.Ctx, 30*time.Second)
	defer cancel()
	answer, err := w.v2026Request(ctx, followID(t.ID, "get", n), "tasks/get", map[string]any{"taskId": t.UpstreamTaskID})
	if err != nil {
		return v2026UpstreamTask{}, false, err
	}
	if answer.Error != nil {
		if answer.Error.Code == jsonrpc.CodeInvalidParams {
			return v2026UpstreamTask{}, false, nil
		}
		return v2026UpstreamTask{}, false, fmt.Errorf("tasks/get: %s", answer.Error.Message)
	}
	up, err := readV2026UpstreamTask(answer.Result, w.route.log)
	if err != nil {
		return v2026UpstreamTask{}, false, err
	}
	return up, true, nil
}

// v2026Request sends the upstream one request of the task's own on the
// 2026-07-28 wire: the required _meta (the client capabilities of the
// task's call, which declared the extension) and the routing headers.
func (w *worker) v2026Request(ctx context.Context, id json.RawMessage, method string, params map[string]any) (*jsonrpc.Message, error) {
	return v2026UpstreamRequest(ctx, w.run.Base, w.run.Next, w.t.Params, id, method, params)
}
