package runtime

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The status messages of a cancelled task: its owner's tasks/cancel, or an
// operator's cancel through the admin API (which the owner did not ask
// for, so the message says who did).
const (
	MsgCancelled         = "The task was cancelled by request."
	MsgOperatorCancelled = "The task was cancelled by an operator through the admin API."
)

// CancelTask records the cancellation, then stops the upstream call: it
// sends the upstream tasks/cancel for a task the upstream runs, else
// notifications/cancelled with the id the upstream knows, and closes the
// call's stream; a call that may still create the upstream's task is
// read on instead, and the task its answer names cancelled
// ([Run.readCreate]).
func (route *Route) CancelTask(ctx context.Context, owner, id string, next http.Handler) (*task.Task, error) {
	return cancelTask(ctx, route, owner, id, MsgCancelled)
}

// cancelTask is CancelTask with the status message to record.
func cancelTask(ctx context.Context, route *Route, owner, id, message string) (*task.Task, error) {
	t, err := route.rt.Store.Update(ctx, owner, id, func(t *task.Task) error {
		return t.SetStatus(task.StatusCancelled, message, Now())
	})
	if err != nil {
		return nil, err
	}
	route.rt.Hub.Changed(id)
	route.AuditOutcome(t) // counts the ending too, as every other outcome

	if run, ok := route.rt.workers.get(id); ok {
		route.stopCancelled(ctx, run, t)
	}
	return t, nil
}

// NotifyUpstreamCancelled tells the upstream the worker's call is cancelled.
func (route *Route) NotifyUpstreamCancelled(ctx context.Context, run *Run, t *task.Task, reason string) {
	body, err := jsonrpc.RequestBytes(nil, "notifications/cancelled", map[string]any{
		"requestId": t.UpstreamID,
		"reason":    reason,
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req := upstream.NewRequest(ctx, run.Base, body)
	if t.Session != "" {
		req.Header.Set(upstream.HeaderSessionID, t.Session)
	}
	resp, err := upstream.Call(run.Next, req)
	if err != nil {
		route.log.Warn("forwarding cancellation upstream", zap.String("task", t.ID), zap.Error(err))
		return
	}
	_ = resp.Body.Close()
	if resp.Status >= 300 {
		route.log.Warn("upstream refused the cancellation", zap.String("task", t.ID), zap.Int("status", resp.Status))
	}
}

// errNoChange aborts an update that finds nothing to do.
var errNoChange = errors.New("no change")
