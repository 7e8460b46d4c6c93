package follow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// msgUpstreamTaskGone is the error of a task whose upstream task the
// upstream no longer knows (it restarted, dropped the session, or purged it).
const msgUpstreamTaskGone = "the upstream no longer knows its task %s (it may have restarted, ended the session, or expired the task); the result is lost"

// maxFollowFailures bounds the tasks/result calls in a row that end
// without an answer while the upstream still knows the task.
const maxFollowFailures = 10

// upstreamTaskParams returns the params of the call that creates the
// upstream's task: the stored params with params.task asking for the
// gateway task's ttl.
func upstreamTaskParams(t *task.Task) (json.RawMessage, error) {
	meta, _ := json.Marshal(map[string]int64{"ttl": t.TTL.Milliseconds()})
	p, err := jsonx.Set(jsonx.OrEmptyObject(t.Params), "task", meta)
	if err != nil {
		return nil, fmt.Errorf("adding params.task: %w", err)
	}
	return p, nil
}

// UpstreamCallParams returns the params of t's tools/call as the upstream
// receives them: with params.task when the upstream makes the task.
func UpstreamCallParams(t *task.Task) (json.RawMessage, error) {
	if t.UpstreamTask && !t.UpstreamV2026 { // 2026-07-28: the extension, kept in t.Params, asks
		return upstreamTaskParams(t)
	}
	return t.Params, nil
}

// UpstreamCallBody encodes t's tools/call to the upstream.
func UpstreamCallBody(t *task.Task) ([]byte, error) {
	params, err := UpstreamCallParams(t)
	if err != nil {
		return nil, err
	}
	return jsonrpc.RequestBytes(t.UpstreamID, "tools/call", params)
}

// V2025Created is what the gateway reads of a 2025-11-25 CreateTaskResult.
type V2025Created struct {
	TaskID        string
	StatusMessage string
}

// ReadV2025Created reads a 2025-11-25 CreateTaskResult, the Task under
// "task" ({"task":{"taskId":…}}); ok is false for any other answer (a
// plain CallToolResult: a server that does not take tasks for the call
// runs it normally).
func ReadV2025Created(result json.RawMessage) (V2025Created, bool) {
	var c struct {
		Task *struct {
			TaskID        string `json:"taskId"`
			StatusMessage string `json:"statusMessage"`
		} `json:"task"`
	}
	if len(result) == 0 || json.Unmarshal(result, &c) != nil || c.Task == nil || c.Task.TaskID == "" {
		return V2025Created{}, false
	}
	return V2025Created{TaskID: c.Task.TaskID, StatusMessage: c.Task.StatusMessage}, true
}

// followID is the id of the worker's n-th request about the upstream's task.
func followID(taskID, what string, n int) json.RawMessage {
	id, _ := json.Marshal(fmt.Sprintf("%s%s:%s:%d", jsonrpc.GatewayIDPrefix, taskID, what, n))
	return id
}

// WithoutRelatedTask removes the upstream's related-task meta from a
// tasks/result answer: it names the upstream's task id, and the task's
// answer carries the gateway's own instead.
func WithoutRelatedTask(result json.RawMessage) json.RawMessage {
	meta, ok := jsonx.Get(result, "_meta")
	if !ok {
		return result
	}
	if _, ok := jsonx.Get(meta, task.MetaRelatedTask); !ok {
		return result
	}
	out, err := jsonx.DeleteIn(result, "_meta", func(k string) bool { return k == task.MetaRelatedTask })
	if err != nil {
		return result
	}
	return out
}

// V2025 follows a 2025-11-25 upstream's task: it polls the upstream's
// tasks/get for the status message (PollV2025Status) while it waits for
// the outcome with tasks/result, and hands the outcome to tr. A
// tasks/result that ends without an answer is asked again, as long as the
// upstream still knows the task. ctx is the worker's: when it ends, the
// task is interrupted with its cause.
func (l Loop) V2025(ctx context.Context, tr Tracker) {
	stopPolling := l.PollV2025Status(ctx, tr)
	defer stopPolling()
	t := l.Task
	failures := 0
	for n := 1; ; n++ {
		id := followID(t.ID, "result", n)
		body, err := jsonrpc.RequestBytes(id, "tasks/result", map[string]string{"taskId": t.UpstreamTaskID})
		if err != nil {
			tr.Finish(nil, rpcerr.InternalError(l.Log, "encoding tasks/result", err, zap.String("task", t.ID)))
			return
		}
		ev := Events(ctx, upstream.StartAttempt(ctx, l.Base, l.Next, id, body), tr)
		if ctx.Err() != nil {
			tr.Interrupt(context.Cause(ctx))
			return
		}
		if ev.Err == nil && ev.Final.Error == nil {
			tr.Finish(WithoutRelatedTask(ev.Final.Result), nil)
			return
		}
		status, known, err := l.v2025Status(ctx, n)
		switch {
		case err == nil && !known:
			tr.Finish(nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, msgUpstreamTaskGone, t.UpstreamTaskID))
			return
		case err == nil && status.Terminal() && ev.Err == nil:
			tr.Finish(nil, ev.Final.Error) // the upstream's outcome is an error
			return
		}
		if failures++; failures > maxFollowFailures {
			cause := ev.Err
			if cause == nil {
				cause = fmt.Errorf("tasks/result: %s", ev.Final.Error.Message)
			}
			tr.Interrupt(fmt.Errorf("following the upstream's task %s: %w", t.UpstreamTaskID, cause))
			return
		}
		select {
		case <-time.After(max(t.PollInterval, 500*time.Millisecond)):
		case <-ctx.Done():
			tr.Interrupt(context.Cause(ctx))
			return
		}
	}
}

// v2025Status asks the upstream for its task (tasks/get): its status, or
// known false when the upstream answers that it has no such task.
func (l Loop) v2025Status(ctx context.Context, n int) (task.Status, bool, error) {
	t := l.Task
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	answer, err := upstream.Request(ctx, l.Base, l.Next, t.Session, followID(t.ID, "get", n), "tasks/get", map[string]string{"taskId": t.UpstreamTaskID})
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

// PollV2025Status polls the upstream's tasks/get at the task's poll
// interval while tasks/result blocks, offering the upstream's status
// message to tr (the only way to see "Analyzing content…" from a server
// that sends no status notifications). It returns the stop.
func (l Loop) PollV2025Status(ctx context.Context, tr Tracker) func() {
	t := l.Task
	ctx, cancel := context.WithCancel(ctx)
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
			answer, err := upstream.Request(ctx, l.Base, l.Next, t.Session, followID(t.ID, "poll", n), "tasks/get", map[string]string{"taskId": t.UpstreamTaskID})
			if err != nil || answer.Error != nil {
				continue // tasks/result's follow-up decides what a failure means
			}
			tr.Status(ctx, answer.Result)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
