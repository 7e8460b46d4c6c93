package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A client that does not speak the tasks extension still gets a tool the
// upstream runs only as a task: the gateway declares the extension on the
// call itself, then waits for the upstream's task within the client's own
// request and answers with its outcome. No task of the gateway's is made:
// the client could not address it.

// MsgInlineInput is the error of a call, made for a client without the
// tasks extension, whose upstream task asked for input: the client has no
// way to answer it.
const MsgInlineInput = "the upstream's task for this call asks for input, which a client can answer only as a task: declare the " + "io.modelcontextprotocol/tasks extension"

// AwaitV2026UpstreamTask polls the upstream's task (created by a call with
// callParams, from base's headers) until it ends, and returns its result or
// error. When ctx ends first (the client left), or the task asks for
// input, the upstream's task is cancelled.
func AwaitV2026UpstreamTask(ctx context.Context, base *http.Request, next http.Handler, callParams json.RawMessage, created V2026Created) (json.RawMessage, *jsonrpc.Error, error) {
	every := clampV2026Poll(time.Duration(created.PollIntervalMs) * time.Millisecond)
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
			return nil, nil, context.Cause(ctx)
		}
		switch {
		case err != nil || (answer.Error != nil && answer.Error.Code != jsonrpc.CodeInvalidParams):
			if err == nil {
				err = fmt.Errorf("tasks/get: %s", answer.Error.Message)
			}
			if failures++; failures > maxFollowFailures {
				cancelUpstream()
				return nil, nil, fmt.Errorf("following the upstream's task %s: %w", created.TaskID, err)
			}
		case answer.Error != nil:
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, msgUpstreamTaskGone, created.TaskID), nil
		default:
			failures = 0
			var up v2026UpstreamTask
			if err := json.Unmarshal(answer.Result, &up); err != nil {
				return nil, nil, fmt.Errorf("reading tasks/get: %w", err)
			}
			if up.PollIntervalMs > 0 {
				every = clampV2026Poll(time.Duration(up.PollIntervalMs) * time.Millisecond)
			}
			switch up.Status {
			case task.StatusCompleted:
				if up.Result == nil {
					up.Result = json.RawMessage("{}")
				}
				return up.Result, nil, nil
			case task.StatusFailed:
				if up.Error == nil {
					up.Error = jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream's task failed: %s", up.StatusMessage)
				}
				return nil, up.Error, nil
			case task.StatusCancelled:
				return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream cancelled its task %s", created.TaskID), nil
			case task.StatusInputRequired:
				cancelUpstream()
				return nil, jsonrpc.Errorf(jsonrpc.CodeMissingRequiredClientCapability, "%s", MsgInlineInput), nil
			}
		}
		timer := time.NewTimer(every)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			cancelUpstream()
			return nil, nil, context.Cause(ctx)
		}
	}
}

// inlineID is the id of the n-th request about an upstream task followed
// within a client's call.
func inlineID(upstreamTaskID, what string, n int) json.RawMessage {
	id, _ := json.Marshal(fmt.Sprintf("%sinline:%s:%s:%d", jsonrpc.GatewayIDPrefix, upstreamTaskID, what, n))
	return id
}

// CancelV2026UpstreamTask sends the upstream tasks/cancel for a task it
// created for a call the gateway could not take on (the client left, the
// store refused the gateway's task): it must not run on untracked.
func CancelV2026UpstreamTask(ctx context.Context, base *http.Request, next http.Handler, callParams json.RawMessage, upstreamTaskID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = v2026UpstreamRequest(ctx, base, next, callParams, inlineID(upstreamTaskID, "cancel", 1), "tasks/cancel", map[string]any{"taskId": upstreamTaskID})
}
