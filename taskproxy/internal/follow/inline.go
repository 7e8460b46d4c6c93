package follow

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A client that does not speak the tasks extension still gets a tool the
// upstream runs only as a task: the gateway declares the extension on the
// call itself, then waits for the upstream's task within the client's own
// request and answers with its outcome. No task of the gateway's is made:
// the client could not address it. When the upstream's task asks for
// input, the client gets it as any 2026-07-28 server asks a plain call
// (an InputRequiredResult), and its retry's answers go to the upstream's
// task with tasks/update (AnswerV2026UpstreamTask).

// InlineOutcome is where an upstream task awaited within a client's call
// stopped: its result or error, or its input requests (by the upstream's
// keys) while it waits for input.
type InlineOutcome struct {
	Result json.RawMessage
	Error  *jsonrpc.Error
	Input  map[string]json.RawMessage
}

// AwaitV2026UpstreamTask polls the upstream's task (created by a call with
// callParams, from base's headers) until it ends or asks for input other
// than the keys answered (just sent with AnswerV2026UpstreamTask: the
// upstream may list them until it has taken the answers). When ctx ends
// first (the client left), the upstream's task is cancelled. log gets a
// debug line for each pollIntervalMs of the upstream's that was clamped or
// ignored.
func AwaitV2026UpstreamTask(ctx context.Context, log *zap.Logger, base *http.Request, next http.Handler, callParams json.RawMessage, created V2026Created, answered map[string]json.RawMessage) (InlineOutcome, error) {
	LogOddNumber(log, "CreateTaskResult", created.TaskID, "pollIntervalMs", created.PollIntervalErr)
	every := pollEvery(created.PollIntervalMs)
	cancelUpstream := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = v2026UpstreamRequest(cctx, base, next, callParams, inlineID(created.TaskID, "cancel", 1), "tasks/cancel", map[string]any{"taskId": created.TaskID})
	}
	failures := 0
	for n := 1; ; n++ {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		answer, err := v2026UpstreamRequest(rctx, base, next, callParams, inlineID(created.TaskID, "get", n), "tasks/get", map[string]any{"taskId": created.TaskID})
		cancel()
		if ctx.Err() != nil {
			cancelUpstream()
			return InlineOutcome{}, context.Cause(ctx)
		}
		switch {
		case err != nil || (answer.Error != nil && answer.Error.Code != jsonrpc.CodeInvalidParams):
			if err == nil {
				err = fmt.Errorf("tasks/get: %s", answer.Error.Message)
			}
			if failures++; failures > maxFollowFailures {
				cancelUpstream()
				return InlineOutcome{}, fmt.Errorf("following the upstream's task %s: %w", created.TaskID, err)
			}
		case answer.Error != nil:
			return InlineOutcome{Error: jsonrpc.Errorf(jsonrpc.CodeInternalError, msgUpstreamTaskGone, created.TaskID)}, nil
		default:
			failures = 0
			up, err := readV2026UpstreamTask(answer.Result, log)
			if err != nil {
				return InlineOutcome{}, err
			}
			if up.PollIntervalMs.Value > 0 {
				every = pollEvery(up.PollIntervalMs.Value)
			}
			switch up.Status {
			case task.StatusCompleted:
				if up.Result == nil {
					up.Result = json.RawMessage("{}")
				}
				return InlineOutcome{Result: up.Result}, nil
			case task.StatusFailed:
				if up.Error == nil {
					up.Error = jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream's task failed: %s", UpstreamStatusMessage(up.StatusMessage))
				}
				return InlineOutcome{Error: up.Error}, nil
			case task.StatusCancelled:
				return InlineOutcome{Error: jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream cancelled its task %s", created.TaskID)}, nil
			case task.StatusInputRequired:
				asked := maps.Clone(up.InputRequests)
				maps.DeleteFunc(asked, func(k string, _ json.RawMessage) bool { _, ok := answered[k]; return ok })
				if len(asked) > 0 {
					return InlineOutcome{Input: asked}, nil
				}
			}
		}
		timer := time.NewTimer(every)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			cancelUpstream()
			return InlineOutcome{}, context.Cause(ctx)
		}
	}
}

// AnswerV2026UpstreamTask sends the upstream's task, awaited within a
// client's call, the client's answers to its input requests (by the
// upstream's keys) with tasks/update.
func AnswerV2026UpstreamTask(ctx context.Context, base *http.Request, next http.Handler, callParams json.RawMessage, upstreamTaskID string, responses map[string]json.RawMessage) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	answer, err := v2026UpstreamRequest(ctx, base, next, callParams, inlineID(upstreamTaskID, "update", 1), "tasks/update", map[string]any{"taskId": upstreamTaskID, "inputResponses": responses})
	switch {
	case err != nil:
		return fmt.Errorf("tasks/update of the upstream's task %s: %w", upstreamTaskID, err)
	case answer.Error != nil:
		return fmt.Errorf("tasks/update of the upstream's task %s: %w", upstreamTaskID, answer.Error)
	}
	return nil
}

// inlineID is the id of the n-th request about an upstream task followed
// within a client's call.
func inlineID(upstreamTaskID, what string, n int) json.RawMessage {
	id, _ := json.Marshal(fmt.Sprintf("%sinline:%s:%s:%d", jsonrpc.GatewayIDPrefix, upstreamTaskID, what, n))
	return id
}

// CancelV2026UpstreamTask sends the upstream tasks/cancel for a task it
// created for a call the gateway could not take on (the client left, the
// store refused the gateway's task): it must not run on untracked. ctx
// must carry the values of base's context (a detached request's own, or
// one derived from it): the next handler needs them to send anything, and
// a bare context.Background() makes the cancel fail unseen.
func CancelV2026UpstreamTask(ctx context.Context, base *http.Request, next http.Handler, callParams json.RawMessage, upstreamTaskID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = v2026UpstreamRequest(ctx, base, next, callParams, inlineID(upstreamTaskID, "cancel", 1), "tasks/cancel", map[string]any{"taskId": upstreamTaskID})
}
