package follow

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Tracker is the gateway's own task as a follow loop sees it: the loop
// reads the upstream's task, the tracker records what it reads (the
// runtime's worker, which owns the record, implements it).
type Tracker interface {
	// Finish records the outcome the upstream's task ended with: its
	// result as the upstream wrote it, or an error.
	Finish(result json.RawMessage, rpcErr *jsonrpc.Error)
	// Interrupt ends the task because following it could not go on, or
	// the loop's context ended (cause is then the context's).
	Interrupt(cause error)
	// Status offers the status message of the upstream's task (a Task
	// object, with its taskId) while the task is working.
	Status(ctx context.Context, upstreamTask json.RawMessage)
	// Request takes a request the upstream sent on a call about its task
	// (an input request, a ping).
	Request(m *jsonrpc.Message)
}

// V2026Tracker is a Tracker of a 2026-07-28 upstream's task, which asks
// for input in its tasks/get answers and takes the answers with
// tasks/update.
type V2026Tracker interface {
	Tracker
	// Inputs records the upstream's outstanding input requests, by its
	// keys.
	Inputs(requests map[string]json.RawMessage)
	// Answers returns the client's answers, by the upstream's keys, to
	// the requests not in sent; none once the task has ended.
	Answers(ctx context.Context, sent map[string]bool) map[string]json.RawMessage
}

// Loop follows the upstream's task of one gateway task: Task is the
// gateway's task as the worker knows it (its UpstreamTaskID set), Base
// and Next where the task's requests go, Log where what goes wrong on
// the way is noted.
type Loop struct {
	Task *task.Task
	Base *http.Request
	Next http.Handler
	Log  *zap.Logger
}

// Events consumes an attempt's events up to its last one: the upstream's
// requests go to the tracker, status notifications of its task offer
// their status message.
func Events(ctx context.Context, a *upstream.Attempt, tr Tracker) *upstream.Event {
	ev, _ := a.Until(ctx, nil, func(ev upstream.Event) bool {
		switch {
		case ev.Request != nil:
			tr.Request(ev.Request)
		case ev.Notification.Method == "notifications/tasks/status":
			tr.Status(ctx, ev.Notification.Params)
		}
		return false
	})
	return &ev
}

// Cancel sends the upstream tasks/cancel for its task id, on
// the task's session. Cancelling a task the upstream already ended is
// refused by it (-32602), which changes nothing here.
func (l Loop) Cancel(ctx context.Context, upstreamTaskID string) {
	t := l.Task
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	id, params := followID(t.ID, "cancel", 1), map[string]any{"taskId": upstreamTaskID}
	var answer *jsonrpc.Message
	var err error
	if t.UpstreamV2026 { // with the 2026-07-28 headers and _meta (v2026UpstreamRequest)
		answer, err = v2026UpstreamRequest(ctx, l.Base, l.Next, t.Params, id, "tasks/cancel", params)
	} else {
		answer, err = upstream.Request(ctx, l.Base, l.Next, t.Session, id, "tasks/cancel", params)
	}
	switch {
	case err != nil:
		l.Log.Warn("cancelling the upstream's task", zap.String("task", t.ID), zap.String("upstream_task", upstreamTaskID), zap.Error(err))
	case answer.Error != nil:
		if ce := l.Log.Check(zap.DebugLevel, "upstream refused tasks/cancel"); ce != nil {
			ce.Write(zap.String("task", t.ID), zap.String("upstream_task", upstreamTaskID), zap.String("error", answer.Error.Message))
		}
	}
}
