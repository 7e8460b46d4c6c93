package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
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

var errTaskCancelled = errors.New("task cancelled")

// worker runs one task in this process: t is its record as the worker
// knows it (updated as it goes), run the context and base request its
// upstream calls go through, route the route it runs under.
type worker struct {
	route *Route
	t     *task.Task
	run   *Run
	// mirrored paces the upstream task's status messages
	// ([statusPace]).
	mirrored statusPace
}

// NewRun prepares the context a task's upstream calls run on: detached from
// the client (base is a detached copy of its request), ended by cancellation
// or by the runtime's shutdown, and by the task's expiry once startWorker
// arms it.
func (route *Route) NewRun(base *http.Request, next http.Handler) *Run {
	base = base.WithContext(upstream.WithMaxResult(upstream.WithDetach(base.Context(), route.cfg.Detach), route.cfg.MaxResultBytes))
	ctx, cancel := context.WithCancelCause(base.Context())
	stopOnShutdown := context.AfterFunc(route.rt.ctx, func() { cancel(context.Cause(route.rt.ctx)) })
	return &Run{
		Ctx:    ctx,
		Cancel: cancel,
		Base:   base,
		Next:   next,
		Release: func() {
			stopOnShutdown()
			cancel(nil)
		},
	}
}

// StartWorker follows t's call in the background: the attempt in flight,
// or, when pending is set, an answer already taken from it.
// At the task's expiry its call is stopped: on 2025-11-25 the upstream is
// told first, since there closing the stream is not a cancellation.
func (route *Route) StartWorker(t *task.Task, run *Run, a *upstream.Attempt, pending *upstream.Event) {
	TraceRun(route, t, run)
	run.owner, run.quota = t.Owner, t.Quota()
	run.create.counted = &route.rt.workers.ended
	w := &worker{route: route, t: t, run: run}
	if t.UpstreamTask && t.UpstreamTaskID == "" && a != nil {
		// Before anything can end the task (a cancel finds the run in
		// the table): its ending must then let the call's
		// CreateTaskResult be read ([Run.readCreate]), on either
		// version.
		run.awaitCreate()
	}
	route.rt.workers.add(t.ID, run)
	route.rt.workers.wg.Add(1)
	if route.rt.Hub.Relayed() { // a cancel may come from another replica
		w.watchRemote()
	}
	// What the expiry needs of t, copied: the worker changes t meanwhile.
	call := &task.Task{ID: t.ID, Owner: t.Owner, Era: t.Era, UpstreamID: t.UpstreamID, Session: t.Session,
		UpstreamTask: t.UpstreamTask, UpstreamV2026: t.UpstreamV2026}
	expire := time.AfterFunc(time.Until(t.ExpiresAt()), func() {
		held := run.holdStop(rpcerr.ErrTaskExpired) // counted as draining before the task shows ended
		// Recorded first: whatever the upstream answers to the
		// cancellation arrives too late to count.
		route.Finish(call, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", rpcerr.ErrTaskExpired))
		route.stopUpstreamCall(run.Ctx, run, call, "task expired")
		if !held {
			run.Cancel(rpcerr.ErrTaskExpired)
		}
	})
	stopRunTimeout := (&runTimer{route: route, t: t, call: call, run: run}).arm()
	runners.Run(run.Ctx, func() {
		defer route.rt.workers.wg.Done()
		defer route.rt.workers.remove(t.ID, run)
		defer run.Release()
		defer expire.Stop()
		defer stopRunTimeout()
		w.work(a, pending)
	})
}

func (w *worker) work(a *upstream.Attempt, pending *upstream.Event) {
	route, t, run := w.route, w.t, w.run
	if t.UpstreamTask && t.UpstreamV2026 {
		w.workV2026UpstreamTask(a, pending)
		return
	}
	if t.UpstreamTask {
		w.workUpstreamTask(a)
		return
	}
	for {
		var keys []string
		if a == nil && pending == nil { // resumed while the task waits for input
			keys = t.RoundInputs()
		} else {
			ev := pending
			if ev == nil {
				ev = w.follow(a)
			}
			pending = nil
			switch {
			case ev.Err != nil:
				route.finishInterrupted(run.Ctx, t, ev.Err)
				if errors.Is(ev.Err, upstream.ErrStreamBroke) && run.Ctx.Err() == nil && UpstreamSpeaksV2025(t) {
					// The gateway gave the call up; the upstream, which
					// takes a lost stream for no cancellation, would
					// run it on for nobody.
					route.NotifyUpstreamCancelled(run.Ctx, run, t, "the gateway lost the call's event stream")
				}
				return
			case route.sessionLost(t, ev):
				route.Finish(t, nil, sessionLostError(t))
				return
			case ev.Final.Error != nil:
				route.Finish(t, nil, ev.Final.Error)
				return
			case t.Era != task.Era2026 || !upstream.IsInputRequired(ev.Final.Result):
				route.Finish(t, BridgedResult(t, ev.Final.Result), nil)
				return
			}
			var err error
			if keys, err = w.recordInput(ev.Final.Result); err != nil {
				route.finishInterrupted(run.Ctx, t, err)
				return
			}
		}
		params, err := w.awaitAnswers(keys)
		if err != nil {
			route.finishInterrupted(run.Ctx, t, err)
			return
		}
		if a, err = w.nextAttempt(params, ""); err != nil {
			route.finishInterrupted(run.Ctx, t, err)
			return
		}
	}
}

// nextAttempt starts the task's next upstream call with params, under a
// new JSON-RPC id, recording the id first; a rerun message, when not
// empty, marks the call a re-run (task.Task.Rerun) and is the task's
// status message while it runs.
func (w *worker) nextAttempt(params json.RawMessage, rerun string) (*upstream.Attempt, error) {
	route, t, run := w.route, w.t, w.run
	var setErr error
	rec, err := route.rt.Store.Update(run.Ctx, t.Owner, t.ID, func(rec *task.Task) error {
		rec.Round++
		rec.UpstreamID = jsonrpc.UpstreamCallID(rec.ID, rec.Round)
		setErr = nil
		if rerun != "" {
			setErr = rec.Rerun(rerun, Now())
		}
		return setErr
	})
	if err != nil {
		return nil, rpcerr.StoreFailed(err, setErr)
	}
	t.Round, t.UpstreamID = rec.Round, rec.UpstreamID
	body, err := jsonrpc.RequestBytes(rec.UpstreamID, "tools/call", params)
	if err != nil {
		return nil, fmt.Errorf("encoding the upstream call: %w", err)
	}
	return upstream.StartAttempt(run.Ctx, run.Base, run.Next, rec.UpstreamID, body), nil
}

// follow consumes an attempt's events up to its last one, relaying progress
// to waiters and turning 2025-11-25 upstream requests into input requests.
func (w *worker) follow(a *upstream.Attempt) *upstream.Event {
	route, t, run := w.route, w.t, w.run
	token := ProgressToken(t.Params)
	var status progressStatus // 2026-07-28: progress becomes the status message
	defer status.stop()
	on := func(ev upstream.Event) bool {
		switch {
		case ev.Request != nil:
			w.upstreamRequest(ev.Request)
		case ev.Notification.Method != "notifications/progress":
		case token != nil && !upstream.SameID(progressTokenOf(ev.Notification.Params), token):
			// another request's progress
		case t.Era == task.Era2025:
			if token != nil { // relayed on the tasks/result stream, by its token
				run.setProgress(ev.Notification.Params)
				route.rt.Hub.Progress(t.ID, ev.Notification.Params)
			}
		default:
			if msg, ok := progressMessage(ev.Notification.Params); ok {
				if msg, ok = status.offer(msg, time.Now()); ok {
					w.setWorkingMessage(run.Ctx, msg)
				}
			}
		}
		return false
	}
	for {
		if ev, last := a.Until(run.Ctx, status.due, on); last {
			return &ev
		}
		if msg, ok := status.fire(time.Now()); ok {
			w.setWorkingMessage(run.Ctx, msg)
		}
	}
}

// finishInterrupted records a call that ended without an answer. A cancelled
// task is already recorded; on shutdown the task is left for recovery.
func (route *Route) finishInterrupted(ctx context.Context, t *task.Task, err error) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errTaskCancelled), errors.Is(cause, errRunTimeout), errors.Is(err, task.ErrTerminal):
		return // recorded by the cancellation or the run_timeout
	case errors.Is(cause, errShutdown), errors.Is(cause, errLeaseLost):
		route.log.Info("task left to another worker", zap.String("task", t.ID), zap.Error(cause))
		return
	case errors.Is(cause, rpcerr.ErrTaskExpired):
		route.Finish(t, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", rpcerr.ErrTaskExpired))
		return
	}
	route.Finish(t, nil, rpcerr.InterruptedError(route.log, err, t.ID))
}

// Finish records the call's outcome: a result or a JSON-RPC error. A result
// with isError:true fails a 2025-11-25 task but completes a 2026-07-28 one.
// An outcome arriving after the task ended (cancelled meanwhile) is dropped.
// A write that fails is retried with backoff; an outcome that still cannot
// be stored (too large for the store, say) is replaced by a small failure,
// so that no task stays working, and no tasks/result waits, until its ttl.
// An outcome the store cannot take only because it is unavailable for now
// is kept as it is, and written when the store is back.
func (route *Route) Finish(t *task.Task, result json.RawMessage, rpcErr *jsonrpc.Error) {
	rec, err := route.storeOutcome(t, func(rec *task.Task) { ApplyOutcome(rec, result, rpcErr, Now()) })
	kept := rpcerr.StoreUnavailable(err)
	if err != nil && !outcomeSettled(err) && !kept {
		route.log.Error("recording task outcome; recording a failure instead", zap.String("task", t.ID), zap.Error(err))
		rec, err = route.storeOutcome(t, func(rec *task.Task) { ApplyOutcome(rec, nil, outcomeLost(), Now()) })
	}
	switch {
	case err == nil:
		route.AuditOutcome(rec)
		route.rt.views.remember(rec, Now()) // its first tasks/get need not read the store
	case outcomeSettled(err):
		if ce := route.log.Check(zap.DebugLevel, "late task outcome dropped"); ce != nil {
			ce.Write(zap.String("task", t.ID), zap.Error(err))
		}
	case kept:
		// Written by the orphan loop once the store is back.
		route.log.Warn("the task store is unavailable; the task's outcome is kept until it is back", zap.String("task", t.ID), zap.Error(err))
		route.rt.unsettled.Store(t.ID, unsettledOutcome{owner: t.Owner, result: result, err: rpcErr})
	default:
		// Retried by the orphan loop until the store takes it.
		route.log.Error("recording task failure", zap.String("task", t.ID), zap.Error(err))
		route.rt.unsettled.Store(t.ID, unsettledOutcome{owner: t.Owner, err: outcomeLost()})
	}
	route.rt.Hub.Changed(t.ID)
}

// MsgOutcomeLost is the error of a task whose outcome could not be stored.
const MsgOutcomeLost = "the task's outcome could not be stored"

// outcomeSettled reports whether an outcome write failed because there is
// nothing left to record: the task ended meanwhile or is gone.
func outcomeSettled(err error) bool {
	return errors.Is(err, task.ErrTerminal) || errors.Is(err, task.ErrNotFound)
}

// defaultOutcomeBackoff spaces the attempts to store an outcome: about six
// seconds in all (Runtime.OutcomeBackoff, which tests shorten).
var defaultOutcomeBackoff = []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 750 * time.Millisecond, 2 * time.Second, 3 * time.Second}

// storeOutcome applies set to the task's record, retrying failed writes
// with backoff. It gives up early when the task is settled, the store is
// closed or the runtime shuts down (the task is then left for recovery).
func (route *Route) storeOutcome(t *task.Task, set func(*task.Task)) (*task.Task, error) {
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
			set(rec)
			return nil
		})
		cancel()
		if err == nil || outcomeSettled(err) || errors.Is(err, task.ErrClosed) || i == len(route.rt.OutcomeBackoff) {
			return rec, err
		}
		select {
		case <-time.After(route.rt.OutcomeBackoff[i]):
		case <-route.rt.ctx.Done():
			return nil, err
		}
	}
}

// ApplyOutcome sets a task's final state from the upstream's answer.
func ApplyOutcome(rec *task.Task, result json.RawMessage, rpcErr *jsonrpc.Error, now time.Time) {
	// A completed task says nothing more than that it completed, as one
	// that ran once does: a message that described the work in progress
	// (an upstream's copied "Gathering sources...", or the gateway's note
	// that the call is being re-run after a restart) ends with the work.
	// The history keeps the re-run (task.Task.Rerun).
	to, message := task.StatusCompleted, ""
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
func (w *worker) upstreamRequest(m *jsonrpc.Message) {
	route, t, run := w.route, w.t, w.run
	ctx := run.Ctx
	if m.Method == "ping" {
		id, taskID := m.ID, t.ID
		go func() {
			// An unanswered ping is the upstream's to time out; the call
			// itself reports an upstream that has gone.
			if err := route.AnswerUpstream(ctx, t, run.Base, run.Next, id, InputAnswer{Result: json.RawMessage("{}")}); err != nil {
				route.log.Debug("answering an upstream's ping", zap.String("task", taskID), zap.Error(err))
			}
		}()
		return
	}
	if !UpstreamSpeaksV2025(t) && t.UpstreamTaskID == "" { // a 2025-11-25 upstream's task asks this way on either wire
		route.log.Warn("ignoring a server-to-client request on the 2026-07-28 wire", zap.String("task", t.ID), zap.String("method", m.Method))
		return
	}
	rec, err := route.rt.Store.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
		if len(rec.Inputs) >= MaxTaskInputs {
			return fmt.Errorf("the upstream asked for input more than %d times", MaxTaskInputs)
		}
		params := m.Params
		if rec.Era == task.Era2026 && rec.UpstreamTaskID != "" {
			// The related task the upstream names is its own: a
			// 2026-07-28 input request needs none.
			params = follow.WithoutRelatedTask(params)
		}
		rec.AddInput(task.InputRequest{Method: m.Method, Params: params, UpstreamID: m.ID})
		if rec.Era == task.Era2026 { // a task of the version bridge's
			return rec.SetStatus(task.StatusInputRequired, MsgBridgedInput, Now())
		}
		return rec.SetStatus(task.StatusInputRequired, MsgV2025Input, Now())
	})
	if err != nil {
		route.log.Warn("recording an upstream input request", zap.String("task", t.ID), zap.String("method", m.Method), zap.Error(err))
		if !errors.Is(err, task.ErrTerminal) && !errors.Is(err, task.ErrNotFound) && ctx.Err() == nil {
			run.Cancel(err) // the task fails with why: an unanswerable request would leave it waiting
		}
		return
	}
	route.AuditTask(AuditInputRequired, rec)
	route.rt.Hub.Changed(t.ID)
}

// InputRequired is a 2026-07-28 input_required answer of an upstream,
// decoded: its input requests under the upstream's keys, and its
// requestState.
type InputRequired struct {
	Requests     []task.InputRequest
	RequestState string
}

// ParseInputRequired decodes an upstream's input_required result.
func ParseInputRequired(result json.RawMessage) (*InputRequired, error) {
	var answer struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(result, &answer); err != nil {
		return nil, fmt.Errorf("reading the upstream's input_required answer: %w", err)
	}
	out := &InputRequired{Requests: make([]task.InputRequest, 0, len(answer.InputRequests)), RequestState: answer.RequestState}
	for upKey, raw := range answer.InputRequests {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(raw, &req); err != nil || req.Method == "" {
			return nil, fmt.Errorf("upstream input request %q is malformed", upKey)
		}
		out.Requests = append(out.Requests, task.InputRequest{Method: req.Method, Params: req.Params, UpstreamKey: upKey})
	}
	return out, nil
}

// Apply records the input requests as rec's inputs of its current round,
// appending their keys to keys, and moves rec to input_required. Without
// requests (the upstream shedding load) it counts a retry instead, and
// fails after maxLoadShedRetries.
func (in *InputRequired) Apply(rec *task.Task, keys []string) ([]string, error) {
	if n := len(rec.Inputs) + len(in.Requests); n > MaxTaskInputs {
		return keys, fmt.Errorf("the upstream asked for too many inputs (%d, limit %d)", n, MaxTaskInputs)
	}
	rec.RequestState = in.RequestState
	for _, req := range in.Requests {
		req.Round = rec.Round
		keys = append(keys, rec.AddInput(req))
	}
	if len(in.Requests) == 0 {
		rec.LoadShed++
		if rec.LoadShed > maxLoadShedRetries {
			return keys, errors.New("the upstream kept answering input_required without input requests")
		}
		return keys, nil
	}
	return keys, rec.SetStatus(task.StatusInputRequired, InputMessage(rec.Era), Now())
}

// maxLoadShedRetries bounds how often an input_required answer without
// input requests (the upstream shedding load) is retried.
const maxLoadShedRetries = 3

// recordInput records a 2026-07-28 input_required answer as the task's
// input requests of this round, keeping the upstream's requestState, and
// returns their keys.
func (w *worker) recordInput(result json.RawMessage) ([]string, error) {
	route, t, run := w.route, w.t, w.run
	// Decoded here, not in the update: its fn runs on the store's one
	// committer goroutine, which every owner's writes wait for.
	answer, err := ParseInputRequired(result)
	if err != nil {
		return nil, err
	}
	var keys []string
	var applyErr error
	rec, err := route.rt.Store.Update(run.Ctx, t.Owner, t.ID, func(rec *task.Task) error {
		keys, applyErr = answer.Apply(rec, keys[:0])
		return applyErr
	})
	if err != nil {
		return nil, rpcerr.StoreFailed(err, applyErr)
	}
	route.rt.Hub.Changed(t.ID)
	if len(keys) > 0 {
		route.AuditTask(AuditInputRequired, rec)
		return keys, nil
	}
	select { // load shedding: try again after the poll interval
	case <-time.After(max(rec.PollInterval, 100*time.Millisecond)):
		return nil, nil
	case <-run.Ctx.Done():
		return nil, context.Cause(run.Ctx)
	}
}

// awaitAnswers waits until the client has answered the input requests with
// keys (tasks/update) and returns the params of the retry: the original ones
// with the answers under the upstream's own keys and its requestState.
func (w *worker) awaitAnswers(keys []string) (json.RawMessage, error) {
	route, t, run := w.route, w.t, w.run
	sub := route.rt.Hub.Subscribe(t.ID)
	defer sub.Close()
	for {
		rec, err := route.rt.Store.Get(run.Ctx, t.Owner, t.ID)
		if err != nil {
			return nil, rpcerr.StoreFailed(err, nil)
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
		case <-run.Ctx.Done():
			return nil, context.Cause(run.Ctx)
		}
	}
}

// ProgressToken returns params._meta.progressToken, or nil.
func ProgressToken(params json.RawMessage) json.RawMessage {
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

// plainIsError is applyOutcome's fast path for result.isError, read on every
// completion: it scans the result's members instead of running the
// reflective decoder over the whole result. It answers only when the answer
// is certainly the one decoding into struct{IsError bool `json:"isError"`}
// gives, ignoring its error (result valid JSON and an object, no key that
// decoding could also match by escapes or case folding, every isError
// member true, false or null), and reports false otherwise.
func plainIsError(result []byte) (isError, ok bool) {
	if !jsonx.Valid(result) {
		return false, true // the decoder fails before setting anything
	}
	plain := true
	_, err := jsonx.EachMember(result, func(m jsonx.Member) bool {
		key := result[m.KeyStart+1 : m.KeyEnd-1]
		switch {
		case string(key) == "isError":
			switch string(result[m.ValueStart:m.ValueEnd]) {
			case "true":
				isError = true
			case "false":
				isError = false
			case "null": // leaves the field as it is
			default:
				plain = false
			}
		case bytes.IndexByte(key, '\\') >= 0 || bytes.EqualFold(key, []byte("isError")):
			plain = false
		}
		return plain
	})
	if err != nil || !plain {
		return false, false
	}
	return isError, true
}
