package follow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

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

// LogOddNumber notes at debug level a number of an upstream's answer that
// was clamped or ignored (err says which and why; nil logs nothing).
func LogOddNumber(log *zap.Logger, answer, upstreamTask, field string, err error) {
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
	LogOddNumber(log, "tasks/get", up.TaskID, "pollIntervalMs", up.PollIntervalMs.Err)
	return up, nil
}

// pollEvery is how often to poll an upstream that asks for ms between
// polls (0: it did not say), within the bounds: clamped as milliseconds,
// before a huge value could overflow a time.Duration.
func pollEvery(ms int64) time.Duration {
	return clampV2026Poll(time.Duration(min(max(ms, 0), maxV2026Poll.Milliseconds())) * time.Millisecond)
}

// V2026ResultFor is a 2026-07-28 upstream's result as t's client takes
// it: a 2025-11-25 task's (the reverse version bridge's) without the
// 2026-07-28 fields, any other as the upstream wrote it.
func V2026ResultFor(t *task.Task, result json.RawMessage) json.RawMessage {
	if t.Era == task.Era2025 {
		return translate.V2025Result(result)
	}
	return result
}

func clampV2026Poll(d time.Duration) time.Duration { return min(max(d, minV2026Poll), maxV2026Poll) }

// V2026 polls a 2026-07-28 upstream's task until it ends, and sends the
// client's answers on as soon as they are given: changed receives a value
// when the gateway's task changed (an answer, perhaps). ctx is the
// worker's: when it ends, the task is interrupted with its cause.
func (l Loop) V2026(ctx context.Context, changed <-chan struct{}, tr V2026Tracker) {
	t := l.Task
	every := clampV2026Poll(t.PollInterval)
	sent := map[string]bool{} // upstream keys whose answers went out
	failures := 0
	for n := 1; ; n++ {
		if l.sendV2026Answers(ctx, n, sent, tr) {
			continue // answers went out: see what the upstream made of them
		}
		up, known, err := l.getV2026(ctx, n)
		if ctx.Err() != nil {
			tr.Interrupt(context.Cause(ctx))
			return
		}
		switch {
		case err != nil:
			if failures++; failures > maxFollowFailures {
				tr.Interrupt(fmt.Errorf("following the upstream's task %s: %w", t.UpstreamTaskID, err))
				return
			}
		case !known:
			tr.Finish(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, msgUpstreamTaskGone, t.UpstreamTaskID))
			return
		default:
			failures = 0
			if up.PollIntervalMs.Value > 0 {
				every = pollEvery(up.PollIntervalMs.Value)
			}
			if l.mirrorV2026(ctx, up, tr) {
				return
			}
		}
		timer := time.NewTimer(every)
		select {
		case <-timer.C:
		case <-changed: // an answer, perhaps: sent at the loop's start
		case <-ctx.Done():
			timer.Stop()
			tr.Interrupt(context.Cause(ctx))
			return
		}
		timer.Stop()
	}
}

// mirrorV2026 hands one tasks/get answer to the tracker; it returns true
// once the task has ended.
func (l Loop) mirrorV2026(ctx context.Context, up v2026UpstreamTask, tr V2026Tracker) bool {
	switch up.Status {
	case task.StatusCompleted:
		result := up.Result
		if result == nil {
			result = json.RawMessage("{}")
		}
		tr.Finish(result, nil)
		return true
	case task.StatusFailed:
		e := up.Error
		if e == nil {
			e = jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream's task failed: %s", UpstreamStatusMessage(up.StatusMessage))
		}
		tr.Finish(nil, e)
		return true
	case task.StatusCancelled:
		// Cancelled upstream, not by this task's client (that cancel is
		// recorded first and ends the worker).
		msg := "the upstream cancelled its task"
		if up.StatusMessage != "" {
			msg += ": " + UpstreamStatusMessage(up.StatusMessage)
		}
		tr.Finish(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", msg))
		return true
	case task.StatusInputRequired:
		tr.Inputs(up.InputRequests)
	case task.StatusWorking:
		if up.StatusMessage != "" {
			tr.Status(ctx, mustJSON(map[string]string{"taskId": l.Task.UpstreamTaskID, "statusMessage": up.StatusMessage}))
		}
	}
	return false
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// sendV2026Answers sends the upstream, with one tasks/update, the client's
// answers not sent yet (tr.Answers; a partial set too: the upstream keeps
// it), under the upstream's keys. It reports whether it sent any. After a
// restart, answers already sent go again; the upstream ignores answers to
// keys no longer outstanding.
func (l Loop) sendV2026Answers(ctx context.Context, n int, sent map[string]bool, tr V2026Tracker) bool {
	t := l.Task
	responses := tr.Answers(ctx, sent)
	if len(responses) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	answer, err := l.v2026Request(ctx, followID(t.ID, "update", n), "tasks/update", map[string]any{"taskId": t.UpstreamTaskID, "inputResponses": responses})
	if err != nil || answer.Error != nil {
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			msg = answer.Error.Message
		}
		l.Log.Warn("sending answers to the upstream's task", zap.String("task", t.ID), zap.String("upstream_task", t.UpstreamTaskID), zap.String("error", msg))
		return false // the next tasks/get decides; the answers go again
	}
	for k := range responses {
		sent[k] = true
	}
	return true
}

// getV2026 asks the upstream for its task: known is false when the
// upstream answers that it has no such task (-32602).
func (l Loop) getV2026(ctx context.Context, n int) (v2026UpstreamTask, bool, error) {
	t := l.Task
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	answer, err := l.v2026Request(ctx, followID(t.ID, "get", n), "tasks/get", map[string]any{"taskId": t.UpstreamTaskID})
	if err != nil {
		return v2026UpstreamTask{}, false, err
	}
	if answer.Error != nil {
		if answer.Error.Code == jsonrpc.CodeInvalidParams {
			return v2026UpstreamTask{}, false, nil
		}
		return v2026UpstreamTask{}, false, fmt.Errorf("tasks/get: %s", answer.Error.Message)
	}
	up, err := readV2026UpstreamTask(answer.Result, l.Log)
	if err != nil {
		return v2026UpstreamTask{}, false, err
	}
	return up, true, nil
}

// v2026Request sends the upstream one request of the task's own on the
// 2026-07-28 wire: the required _meta (the client capabilities of the
// task's call, which declared the extension) and the routing headers.
func (l Loop) v2026Request(ctx context.Context, id json.RawMessage, method string, params map[string]any) (*jsonrpc.Message, error) {
	return v2026UpstreamRequest(ctx, l.Base, l.Next, l.Task.Params, id, method, params)
}
