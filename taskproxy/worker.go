package taskproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// A worker makes a task's upstream call through the next handler, on a
// context detached from the client's request, and records what comes back:
// input requests, progress, and the final result or error.

// startWorker runs t's upstream call in the background. base is a detached
// copy of the request that created the task.
func (g *Gateway) startWorker(t *Task, base *http.Request, next http.Handler) {
	ctx, cancel := context.WithCancelCause(base.Context())
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, t.ExpiresAt(), errTaskExpired)
	stopOnShutdown := context.AfterFunc(g.rt.ctx, func() { cancel(context.Cause(g.rt.ctx)) })
	rt := &runningTask{cancel: cancel, base: base, next: next}
	g.rt.workers.add(t.ID, rt)
	g.rt.workers.wg.Add(1)
	go func() {
		defer g.rt.workers.wg.Done()
		defer g.rt.workers.remove(t.ID, rt)
		defer stopOnShutdown()
		defer cancelDeadline()
		defer cancel(nil)
		g.runCall(ctx, t, rt)
	}()
}

var errTaskExpired = errors.New("task expired before completion")

// runCall makes the upstream call and records its outcome.
func (g *Gateway) runCall(ctx context.Context, t *Task, rt *runningTask) {
	body, err := RequestBytes(t.UpstreamID, "tools/call", t.Params)
	if err != nil {
		g.finish(t, nil, Errorf(CodeInternalError, "encoding the upstream call: %v", err))
		return
	}
	resp, err := callUpstream(rt.next, newUpstreamRequest(ctx, rt.base, body))
	if err != nil {
		g.finishInterrupted(ctx, t, fmt.Errorf("calling the upstream: %w", err))
		return
	}
	defer finishBody(resp.Body, 2*time.Second)
	if resp.Status < 200 || resp.Status > 299 {
		g.finish(t, nil, describeHTTPFailure(resp))
		return
	}
	token := progressToken(t.Params)
	answered := false
	err = readMessages(resp, func(m *Message) (bool, error) {
		switch {
		case m.IsResponse() && sameID(m.ID, t.UpstreamID):
			g.finish(t, m.Result, m.Error)
			answered = true
			return true, nil
		case m.IsRequest():
			g.upstreamRequest(ctx, t, rt, m)
		case m.IsNotification() && m.Method == "notifications/progress":
			if token != nil && sameID(progressTokenOf(m.Params), token) {
				rt.setProgress(m.Params)
				g.rt.Hub.Progress(t.ID, m.Params)
			}
		}
		return false, nil
	})
	if answered {
		return
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = errors.New("the upstream ended its answer without a response to the call")
	}
	g.finishInterrupted(ctx, t, err)
}

// finishInterrupted records a call that ended without an answer. A cancelled
// task is already recorded; on shutdown the task is left for recovery.
func (g *Gateway) finishInterrupted(ctx context.Context, t *Task, err error) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTaskCancelled):
		return
	case errors.Is(cause, errShutdown):
		g.log.Info("task left running at shutdown", zap.String("task", t.ID))
		return
	case errors.Is(cause, errTaskExpired):
		g.finish(t, nil, Errorf(CodeInternalError, "%v", errTaskExpired))
		return
	}
	g.finish(t, nil, Errorf(CodeInternalError, "%v", err))
}

// finish records the call's outcome: a result or a JSON-RPC error. A result
// with isError:true fails a 2025-11-25 task but completes a 2026-07-28 one.
// An outcome arriving after the task ended (cancelled meanwhile) is dropped.
func (g *Gateway) finish(t *Task, result json.RawMessage, rpcErr *Error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *Task) error {
		now := clock()
		if rpcErr != nil {
			rec.Error = rpcErr
			return rec.SetStatus(StatusFailed, rpcErr.Message, now)
		}
		rec.Result = result
		var r struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(result, &r)
		rec.IsError = r.IsError
		if r.IsError && rec.Era == EraLegacy {
			return rec.SetStatus(StatusFailed, toolErrorMessage(result), now)
		}
		return rec.SetStatus(StatusCompleted, "", now)
	})
	switch {
	case errors.Is(err, ErrTerminal), errors.Is(err, ErrNotFound):
		if ce := g.log.Check(zap.DebugLevel, "late task outcome dropped"); ce != nil {
			ce.Write(zap.String("task", t.ID), zap.Error(err))
		}
	case err != nil:
		g.log.Error("recording task outcome", zap.String("task", t.ID), zap.Error(err))
	}
	g.rt.Hub.Changed(t.ID)
}

// toolErrorMessage is the status message of a tool result with isError: the
// start of its first text content.
func toolErrorMessage(result json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal(result, &r)
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != "" {
			if len(c.Text) > 200 {
				return "Tool error: " + c.Text[:200] + "…"
			}
			return "Tool error: " + c.Text
		}
	}
	return "The tool reported an error."
}

// upstreamRequest handles a request the upstream sends during the call: a
// ping is answered at once; anything else (elicitation, sampling, roots) is
// input the client must give, so the task waits in input_required.
func (g *Gateway) upstreamRequest(ctx context.Context, t *Task, rt *runningTask, m *Message) {
	if m.Method == "ping" {
		go g.answerUpstream(ctx, t, rt, m.ID, json.RawMessage("{}"))
		return
	}
	_, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *Task) error {
		rec.AddInput(InputRequest{Method: m.Method, Params: m.Params, UpstreamID: m.ID})
		return rec.SetStatus(StatusInputRequired, "The task needs input: answer the requests on the tasks/result stream.", clock())
	})
	if err != nil {
		g.log.Warn("recording an upstream input request", zap.String("task", t.ID), zap.String("method", m.Method), zap.Error(err))
		return
	}
	g.rt.Hub.Changed(t.ID)
}

// answerUpstream sends the upstream a response to one of its requests.
func (g *Gateway) answerUpstream(ctx context.Context, t *Task, rt *runningTask, id, result json.RawMessage) {
	body, err := ResponseBytes(id, result)
	if err != nil {
		return
	}
	req := newUpstreamRequest(ctx, rt.base, body)
	if t.Session != "" {
		req.Header.Set(headerSessionID, t.Session)
	}
	if resp, err := callUpstream(rt.next, req); err == nil {
		_ = resp.Body.Close()
	}
}

// progressToken returns params._meta.progressToken, or nil.
func progressToken(params json.RawMessage) json.RawMessage {
	meta, ok := getMember(params, "_meta")
	if !ok {
		return nil
	}
	tok, ok := getMember(meta, "progressToken")
	if !ok {
		return nil
	}
	return tok
}

func progressTokenOf(params json.RawMessage) json.RawMessage {
	tok, _ := getMember(params, "progressToken")
	return tok
}
