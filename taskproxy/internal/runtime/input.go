package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// One input path serves both eras. A 2025-11-25 upstream asks for input with
// server-to-client requests (elicitation/create, sampling/createMessage) on
// the call's stream; a 2026-07-28 upstream answers input_required with
// inputRequests and expects a retry. Either way the task record holds the
// requests under keys of the gateway's own, never reused, and a client's
// answer, whichever wire it comes on (a POSTed JSON-RPC response on
// 2025-11-25, tasks/update on 2026-07-28), goes through answerInputs.

// MaxTaskInputs bounds the input requests one task records, and
// MaxInputResponses the answers one tasks/update may carry: a task can
// never have more outstanding, and every answer costs work before the
// owner's task is even found.
const (
	MaxTaskInputs     = 1000
	MaxInputResponses = MaxTaskInputs
)

// InputAnswer is a client's answer to one input request: a result or, on
// 2025-11-25, a JSON-RPC error (the client declined).
type InputAnswer struct {
	Result json.RawMessage
	Error  *jsonrpc.Error
}

// AnswerInputs applies answers, by input key, to the owner's task. Answers to
// upstream requests are sent to the upstream under the id it asked with;
// answers to input_required requests are kept for the worker's retry. Keys
// that are not outstanding (never issued, already answered) are ignored, as
// is a task that has ended. Once nothing is outstanding the task is working
// again. caller supplies the headers and next handler for the upstream.
func (route *Route) AnswerInputs(ctx context.Context, owner, taskID string, answers map[string]InputAnswer, caller *http.Request, next http.Handler) (*task.Task, error) {
	t, err := route.rt.Store.Get(ctx, owner, taskID)
	if err != nil || t.Status.Terminal() {
		return t, err
	}
	// Every loop here runs over the task's own inputs (bounded by
	// maxTaskInputs) with map lookups of the answers, never over the answers
	// with a search of the inputs: the update's fn runs on the store's one
	// committer goroutine, and whatever it costs every owner waits for.
	for _, in := range t.Inputs {
		answer, ok := answers[in.Key]
		if !ok || in.Answered || in.UpstreamID == nil {
			continue
		}
		var base *http.Request
		via := next
		if run, ok := route.rt.workers.get(taskID); ok {
			base, via = run.Base, run.Next
		} else {
			// The worker runs on another replica, or not yet after a
			// restart: the answer goes as the worker would send it, not
			// on the caller's wire (a 2026-07-28 tasks/update answering
			// a call on a 2025-11-25 session).
			base = TaskUpstreamBase(ctx, caller, t)
		}
		if err := route.AnswerUpstream(ctx, t, base, via, in.UpstreamID, answer); err != nil {
			return nil, err
		}
	}
	t, err = route.rt.Store.Update(ctx, owner, taskID, func(rec *task.Task) error {
		changed := false
		for i := range rec.Inputs {
			in := &rec.Inputs[i]
			answer, ok := answers[in.Key]
			if !ok || in.Answered {
				continue
			}
			in.Answered, changed = true, true
			if in.UpstreamKey != "" {
				in.Response = answer.Result
			}
		}
		if !changed {
			return errNoChange
		}
		rec.UpdatedAt = Now()
		if len(rec.Outstanding()) == 0 && rec.Status == task.StatusInputRequired {
			return rec.SetStatus(task.StatusWorking, "", Now())
		}
		return nil
	})
	switch {
	case err == nil:
		route.AuditTask(auditInputAnswered, t)
		route.rt.Hub.Changed(taskID)
		return t, nil
	case errors.Is(err, errNoChange), errors.Is(err, task.ErrTerminal):
		return route.rt.Store.Get(ctx, owner, taskID)
	}
	return nil, err
}

// AnswerUpstream sends the upstream a JSON-RPC response to one of its
// requests, on the task's session.
func (route *Route) AnswerUpstream(ctx context.Context, t *task.Task, base *http.Request, next http.Handler, id json.RawMessage, answer InputAnswer) error {
	body, err := json.Marshal(jsonrpc.Message{JSONRPC: "2.0", ID: id, Result: answer.Result, Error: answer.Error})
	if err != nil {
		return fmt.Errorf("encoding the answer: %w", err)
	}
	req := upstream.NewRequest(ctx, base, body)
	if t.Session != "" {
		req.Header.Set(upstream.HeaderSessionID, t.Session)
	}
	resp, err := upstream.Call(next, req)
	if err != nil {
		return &rpcerr.ForwardError{Err: fmt.Errorf("forwarding the answer upstream: %w", err)}
	}
	_ = resp.Body.Close()
	if resp.Status >= 300 {
		return &rpcerr.ForwardError{Err: fmt.Errorf("the upstream refused the answer with HTTP %d", resp.Status)}
	}
	return nil
}
