package taskproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A worker follows a task's upstream call, on a context detached from the
// client's request, and records what comes back: input requests, progress,
// and the final result or error. On 2026-07-28 an input_required answer ends
// one attempt; once the client has answered every request, the worker makes
// the next attempt with the answers.

var (
	errTaskExpired   = errors.New("task expired before completion")
	errTaskCancelled = errors.New("task cancelled")
)

// newRun prepares the context a task's upstream calls run on: detached from
// the client (base is a detached copy of its request), ended by cancellation
// or by the runtime's shutdown, and by the task's expiry once startWorker
// arms it.
func (g *Gateway) newRun(base *http.Request, next http.Handler) *runningTask {
	base = base.WithContext(upstream.WithMaxResult(upstream.WithDetach(base.Context(), g.cfg.Detach), g.cfg.MaxResultBytes))
	ctx, cancel := context.WithCancelCause(base.Context())
	stopOnShutdown := context.AfterFunc(g.rt.ctx, func() { cancel(context.Cause(g.rt.ctx)) })
	return &runningTask{
		ctx:    ctx,
		cancel: cancel,
		base:   base,
		next:   next,
		release: func() {
			stopOnShutdown()
			cancel(nil)
		},
	}
}

// startWorker follows t's call in the background: the attempt in flight,
// or, when pending is set, an answer already taken from it.
// At the task's expiry its call is stopped: on 2025-11-25 the upstream is
// told first, since there closing the stream is not a cancellation.
func (g *Gateway) startWorker(t *task.Task, run *runningTask, a *upstream.Attempt, pending *upstream.Event) {
	run.owner = t.Owner
	g.rt.workers.add(t.ID, run)
	g.rt.workers.wg.Add(1)
	if g.rt.Hub.relayed() { // a cancel may come from another replica
		g.watchRemote(t, run)
	}
	// What the expiry needs of t, copied: the worker changes t meanwhile.
	call := &task.Task{ID: t.ID, Owner: t.Owner, Era: t.Era, UpstreamID: t.UpstreamID, Session: t.Session}
	expire := time.AfterFunc(time.Until(t.ExpiresAt()), func() {
		// Recorded first: whatever the upstream answers to the
		// cancellation arrives too late to count.
		g.finish(call, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", errTaskExpired))
		g.stopUpstreamCall(run.ctx, run, call, "task expired")
		run.cancel(errTaskExpired)
	})
	runners.Run(func() {
		defer g.rt.workers.wg.Done()
		defer g.rt.workers.remove(t.ID, run)
		defer run.release()
		defer expire.Stop()
		g.work(t, run, a, pending)
	})
}

func (g *Gateway) work(t *task.Task, run *runningTask, a *upstream.Attempt, pending *upstream.Event) {
	if t.UpstreamTask {
		g.workUpstreamTask(t, run, a)
		return
	}
	for {
		var keys []string
		if a == nil && pending == nil { // resumed while the task waits for input
			keys = t.RoundInputs()
		} else {
			ev := pending
			if ev == nil {
				ev = g.follow(t, run, a)
			}
			pending = nil
			switch {
			case ev.Err != nil:
				g.finishInterrupted(run.ctx, t, ev.Err)
				return
			case ev.Final.Error != nil:
				g.finish(t, nil, ev.Final.Error)
				return
			case t.Era != task.Era2026 || !upstream.IsInputRequired(ev.Final.Result):
				g.finish(t, bridgedResult(t, ev.Final.Result), nil)
				return
			}
			var err error
			if keys, err = g.recordInput(t, run, ev.Final.Result); err != nil {
				g.finishInterrupted(run.ctx, t, err)
				return
			}
		}
		params, err := g.awaitAnswers(t, run, keys)
		if err != nil {
			g.finishInterrupted(run.ctx, t, err)
			return
		}
		if a, err = g.nextAttempt(t, run, params, ""); err != nil {
			g.finishInterrupted(run.ctx, t, err)
			return
		}
	}
}

// nextAttempt starts the task's next upstream call with params, under a
// new JSON-RPC id, recording the id (and message, when not empty) first.
func (g *Gateway) nextAttempt(t *task.Task, run *runningTask, params json.RawMessage, message string) (*upstream.Attempt, error) {
	rec, err := g.rt.Store.Update(run.ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.Round++
		rec.UpstreamID = jsonrpc.UpstreamCallID(rec.ID, rec.Round)
		if message != "" {
			return rec.SetStatus(task.StatusWorking, message, clock())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.Round, t.UpstreamID = rec.Round, rec.UpstreamID
	body, err := jsonrpc.RequestBytes(rec.UpstreamID, "tools/call", params)
	if err != nil {
		return nil, fmt.Errorf("encoding the upstream call: %w", err)
	}
	return upstream.StartAttempt(run.ctx, run.base, run.next, rec.UpstreamID, body), nil
}

// follow consumes an attempt's events up to its last one, relaying progress
// to waiters and turning 2025-11-25 upstream requests into input requests.
func (g *Gateway) follow(t *task.Task, run *runningTask, a *upstream.Attempt) *upstream.Event {
	token := progressToken(t.Params)
	for ev := range a.Events {
		switch {
		case ev.Last():
			return &ev
		case ev.Request != nil:
			g.upstreamRequest(run.ctx, t, run, ev.Request)
		case ev.Notification.Method == "notifications/progress" && t.Era == task.Era2025:
			if token != nil && upstream.SameID(progressTokenOf(ev.Notification.Params), token) {
				run.setProgress(ev.Notification.Params)
				g.rt.Hub.Progress(t.ID, ev.Notification.Params)
			}
		}
	}
	// The pump stops without a last event only when the context ended.
	return &upstream.Event{Err: context.Cause(run.ctx)}
}

// finishInterrupted records a call that ended without an answer. A cancelled
// task is already recorded; on shutdown the task is left for recovery.
func (g *Gateway) finishInterrupted(ctx context.Context, t *task.Task, err error) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTaskCancelled), errors.Is(err, task.ErrTerminal):
		return
	case errors.Is(cause, errShutdown), errors.Is(cause, errLeaseLost):
		g.log.Info("task left to another worker", zap.String("task", t.ID), zap.Error(cause))
		return
	case errors.Is(cause, errTaskExpired):
		g.finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", errTaskExpired))
		return
	}
	g.finish(t, nil, g.upstreamFailure(err, zap.String("task", t.ID)))
}

// finish records the call's outcome: a result or a JSON-RPC error. A result
// with isError:true fails a 2025-11-25 task but completes a 2026-07-28 one.
// An outcome arriving after the task ended (cancelled meanwhile) is dropped.
// A write that fails is retried with backoff; an outcome that still cannot
// be stored (too large for the store, say) is replaced by a small failure,
// so that no task stays working, and no tasks/result waits, until its ttl.
// An outcome the store cannot take only because it is unavailable for now
// is kept as it is, and written when the store is back.
func (g *Gateway) finish(t *task.Task, result json.RawMessage, rpcErr *jsonrpc.Error) {
	rec, err := g.storeOutcome(t, func(rec *task.Task) { applyOutcome(rec, result, rpcErr, clock()) })
	kept := storeUnavailable(err)
	if err != nil && !outcomeSettled(err) && !kept {
		g.log.Error("recording task outcome; recording a failure instead", zap.String("task", t.ID), zap.Error(err))
		rec, err = g.storeOutcome(t, func(rec *task.Task) { applyOutcome(rec, nil, outcomeLost(), clock()) })
	}
	switch {
	case err == nil:
		g.auditOutcome(rec)
		g.rt.views.remember(rec, clock()) // its first tasks/get need not read the store
	case outcomeSettled(err):
		if ce := g.log.Check(zap.DebugLevel, "late task outcome dropped"); ce != nil {
			ce.Write(zap.String("task", t.ID), zap.Error(err))
		}
	case kept:
		// Written by the orphan loop once the store is back.
		g.log.Warn("the task store is unavailable; the task's outcome is kept until it is back", zap.String("task", t.ID), zap.Error(err))
		g.rt.unsettled.Store(t.ID, unsettledOutcome{owner: t.Owner, result: result, err: rpcErr})
	default:
		// Retried by the orphan loop until the store takes it.
		g.log.Error("recording task failure", zap.String("task", t.ID), zap.Error(err))
		g.rt.unsettled.Store(t.ID, unsettledOutcome{owner: t.Owner, err: outcomeLost()})
	}
	g.rt.Hub.Changed(t.ID)
}

// msgOutcomeLost is the error of a task whose outcome could not be stored.
const msgOutcomeLost = "the task's outcome could not be stored"

// outcomeSettled reports whether an outcome write failed because there is
// nothing left to record: the task ended meanwhile or is gone.
func outcomeSettled(err error) bool {
	return errors.Is(err, task.ErrTerminal) || errors.Is(err, task.ErrNotFound)
}

// defaultOutcomeBackoff spaces the attempts to store an outcome: about six
// seconds in all (Runtime.outcomeBackoff, which tests shorten).
var defaultOutcomeBackoff = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 750 * time.Millisecond, 2 * time.Second, 3 * time.Second}

// storeOutcome applies set to the task's record, retrying failed writes
// with backoff. It gives up early when the task is settled, the store is
// closed or the runtime shuts down (the task is then left for recovery).
func (g *Gateway) storeOutcome(t *task.Task, set func(*task.Task)) (*task.Task, error) {
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rec, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
			set(rec)
			return nil
		})
		cancel()
		if err == nil || outcomeSettled(err) || errors.Is(err, task.ErrClosed) || i == len(g.rt.outcomeBackoff) {
			return rec, err
		}
		select {
		case <-time.After(g.rt.outcomeBackoff[i]):
		case <-g.rt.ctx.Done():
			return nil, err
		}
	}
}

// applyOutcome sets a task's final state from the upstream's answer.
func applyOutcome(rec *task.Task, result json.RawMessage, rpcErr *jsonrpc.Error, now time.Time) {
	to, message := task.StatusCompleted, completedMessage(rec.StatusMessage)
	if rpcErr != nil {
		rec.Error, to, message = rpcErr, task.StatusFailed, rpcErr.Message
	} else {
		rec.Result = result
		var r struct {
			IsError bool `json:"isError"`
		}
		if isError, ok := plainIsError(result); ok {
			r.IsError = isError
		} else {
			_ = json.Unmarshal(result, &r)
		}
		rec.IsError = r.IsError
		if r.IsError && rec.Era == task.Era2025 {
			to, message = task.StatusFailed, toolErrorMessage(result)
		}
	}
	// Callers hold a non-terminal record (Store.Update never passes a
	// terminal one), so the transition is always allowed; SetStatus
	// records it in the history.
	_ = rec.SetStatus(to, message, now)
}

// completedMessage is the status message a task keeps when it completes,
// given the one it had while working: the gateway's note that the call was
// re-run (the result comes from a second run); a message that described
// the work in progress, as an upstream's copied "Gathering sources...",
// ends with the work.
func completedMessage(working string) string {
	if working == msgRerun || working == msgReplicaRerun {
		return working
	}
	return ""
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
func (g *Gateway) upstreamRequest(ctx context.Context, t *task.Task, run *runningTask, m *jsonrpc.Message) {
	if m.Method == "ping" {
		go g.answerUpstream(ctx, t, run.base, run.next, m.ID, inputAnswer{Result: json.RawMessage("{}")})
		return
	}
	if !upstreamSpeaksV2025(t) && t.UpstreamTaskID == "" { // a 2025-11-25 upstream's task asks this way on either wire
		g.log.Warn("ignoring a server-to-client request on the 2026-07-28 wire", zap.String("task", t.ID), zap.String("method", m.Method))
		return
	}
	rec, err := g.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		if len(rec.Inputs) >= maxTaskInputs {
			return fmt.Errorf("the upstream asked for input more than %d times", maxTaskInputs)
		}
		params := m.Params
		if rec.Era == task.Era2026 && rec.UpstreamTaskID != "" {
			// The related task the upstream names is its own: a
			// 2026-07-28 input request needs none.
			params = withoutRelatedTask(params)
		}
		rec.AddInput(task.InputRequest{Method: m.Method, Params: params, UpstreamID: m.ID})
		if rec.Era == task.Era2026 { // a bridged task (bridge_call.go)
			return rec.SetStatus(task.StatusInputRequired, msgBridgedInput, clock())
		}
		return rec.SetStatus(task.StatusInputRequired, "The task needs input: answer the requests on the tasks/result stream.", clock())
	})
	if err != nil {
		g.log.Warn("recording an upstream input request", zap.String("task", t.ID), zap.String("method", m.Method), zap.Error(err))
		if !errors.Is(err, task.ErrTerminal) && !errors.Is(err, task.ErrNotFound) && ctx.Err() == nil {
			run.cancel(err) // the task fails with why: an unanswerable request would leave it waiting
		}
		return
	}
	g.auditTask(auditInputRequired, rec)
	g.rt.Hub.Changed(t.ID)
}

// maxLoadShedRetries bounds how often an input_required answer without
// input requests (the upstream shedding load) is retried.
const maxLoadShedRetries = 3

// recordInput records a 2026-07-28 input_required answer as the task's
// input requests of this round, keeping the upstream's requestState, and
// returns their keys.
func (g *Gateway) recordInput(t *task.Task, run *runningTask, result json.RawMessage) ([]string, error) {
	var answer struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(result, &answer); err != nil {
		return nil, fmt.Errorf("reading the upstream's input_required answer: %w", err)
	}
	// Decoded here, not in the update: its fn runs on the store's one
	// committer goroutine, which every owner's writes wait for.
	requests := make([]task.InputRequest, 0, len(answer.InputRequests))
	for upKey, raw := range answer.InputRequests {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || req.Method == "" {
			return nil, fmt.Errorf("upstream input request %q is malformed", upKey)
		}
		requests = append(requests, task.InputRequest{Method: req.Method, Params: req.Params, UpstreamKey: upKey})
	}
	var keys []string
	rec, err := g.rt.Store.Update(run.ctx, t.Owner, t.ID, func(rec *task.Task) error {
		keys = keys[:0]
		if n := len(rec.Inputs) + len(requests); n > maxTaskInputs {
			return fmt.Errorf("the upstream asked for too many inputs (%d, limit %d)", n, maxTaskInputs)
		}
		rec.RequestState = answer.RequestState
		for _, in := range requests {
			in.Round = rec.Round
			keys = append(keys, rec.AddInput(in))
		}
		if len(keys) == 0 {
			rec.LoadShed++
			if rec.LoadShed > maxLoadShedRetries {
				return errors.New("the upstream kept answering input_required without input requests")
			}
			return nil
		}
		return rec.SetStatus(task.StatusInputRequired, "The task needs input: answer its inputRequests with tasks/update.", clock())
	})
	if err != nil {
		return nil, err
	}
	g.rt.Hub.Changed(t.ID)
	if len(keys) > 0 {
		g.auditTask(auditInputRequired, rec)
		return keys, nil
	}
	select { // load shedding: try again after the poll interval
	case <-time.After(max(rec.PollInterval, 100*time.Millisecond)):
		return nil, nil
	case <-run.ctx.Done():
		return nil, context.Cause(run.ctx)
	}
}

// awaitAnswers waits until the client has answered the input requests with
// keys (tasks/update) and returns the params of the retry: the original ones
// with the answers under the upstream's own keys and its requestState.
func (g *Gateway) awaitAnswers(t *task.Task, run *runningTask, keys []string) (json.RawMessage, error) {
	sub := g.rt.Hub.Subscribe(t.ID)
	defer sub.Close()
	for {
		rec, err := g.rt.Store.Get(run.ctx, t.Owner, t.ID)
		if err != nil {
			return nil, err
		}
		if rec.Status.Terminal() {
			return nil, task.ErrTerminal
		}
		if answers, ok := rec.AnswersFor(keys); ok {
			params := t.Params
			if len(answers) > 0 {
				responses, _ := json.Marshal(answers)
				if params, err = jsonx.Set(params, "inputResponses", responses); err != nil {
					return nil, err
				}
			}
			if rec.RequestState != "" {
				state, _ := json.Marshal(rec.RequestState)
				if params, err = jsonx.Set(params, "requestState", state); err != nil {
					return nil, err
				}
			}
			return params, nil
		}
		select {
		case <-sub.Changed:
		case <-run.ctx.Done():
			return nil, context.Cause(run.ctx)
		}
	}
}

// progressToken returns params._meta.progressToken, or nil.
func progressToken(params json.RawMessage) json.RawMessage {
	meta, ok := jsonx.Get(params, "_meta")
	if !ok {
		return nil
	}
	tok, ok := jsonx.Get(meta, "progressToken")
	if !ok {
		return nil
	}
	return tok
}

func progressTokenOf(params json.RawMessage) json.RawMessage {
	tok, _ := jsonx.Get(params, "progressToken")
	return tok
}
