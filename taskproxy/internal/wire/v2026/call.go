package v2026

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Server-directed task creation (2026-07-28). The gateway starts the
// upstream call itself and waits up to task_after:
//
//   - the upstream answers first: the answer passes through to the client,
//     as a plain proxy would give it; for a tool marked required the answer
//     becomes a task created already ended;
//   - the upstream answers input_required first: for a required tool it
//     passes through (multi-round-trip before task creation, as the spec
//     advises, and the client's retry is a new call); for other tools the
//     call becomes a task in input_required, answered with tasks/update;
//   - task_after passes: the task is stored, then the CreateTaskResult is
//     answered, and a worker keeps the upstream stream open, since closing
//     it would cancel the call;
//   - the client goes away first: the upstream call is cancelled; to an
//     upstream that runs tasks itself, whose task the call may have made
//     already, the call is read on instead, and that task cancelled
//     (leftBeforeTask).

// ErrClientGone ends a call whose client went away before it became a task.
var ErrClientGone = errors.New("the client closed its request before the call became a task")

func (c *call) serveToolsCall() error {
	if e := passedOnHeadersAgree(c.R, c.Msg); e != nil {
		c.fail(e)
		return nil
	}
	var name string
	if n, err := wire.StringParam(c.Msg.Params, "name"); err == nil {
		name = n
	}
	mode := c.Tools.EffectiveMode(name)
	meta, e := ReadRequestMeta(c.Msg.Params)
	if e != nil {
		if mode == task.SupportRequired {
			// A tool that runs only as a task is the gateway's to
			// answer, malformed or not: the refusal is the one tasks/get
			// gets, never an upstream's run of the call without a task.
			c.fail(e)
			return nil
		}
		// Malformed for this wire, no task of the gateway's: the
		// upstream's to judge, without a tasks extension entry (one not
		// an object) it could take for a declaration.
		return c.passWithoutTasks()
	}
	declared := meta.DeclaresTasks()
	if !declared {
		if w, ok := c.inlineRetry(name); ok {
			return c.resumeInline(w)
		}
		if c.plainOnTaskRuntime(mode) {
			return c.servePlainOnTaskRuntime()
		}
	}
	switch {
	case !declared && mode == task.SupportRequired:
		if c.valid(false) {
			c.fail(ErrMissingTasksCapability("tool " + name + " runs only as a task"))
		}
		return nil
	case !declared || mode == task.SupportForbidden:
		return c.passWithoutTasks()
	}
	if !c.valid(true) || !c.GuardOrigin() || c.Limited() {
		return nil
	}
	if e := c.CheckQuota(); e != nil {
		c.fail(e) // the same refusal as on the 2025-11-25 wire
		return nil
	}
	if c.upstreamRunsTasks() {
		return c.runOnTaskRuntime(name, mode)
	}
	if key, _ := gate.IdempotencyOf(c.R, c.Msg.Params); key != "" || c.Tools.UpstreamRunsTask(name) {
		return c.runIdempotentCall(name)
	}
	return c.runCall(name, mode, false)
}

// runIdempotentCall serves a call with an idempotency key: it becomes a task
// at once, before the upstream is called, so that a repeat of it finds the
// task and no second call is made. A call of a tool the upstream runs as a
// task itself ([wire.ToolPolicy.UpstreamRunsTask]) is served the same way: its task is created
// at the upstream and followed.
func (c *call) runIdempotentCall(name string) error {
	params, err := withoutTasksExtension(c.Msg.Params)
	if err != nil {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return nil
	}
	t := c.NewTask(task.Era2026, name, params, c.DefaultTTL)
	if !c.StoreTask(t, func(t *task.Task) any { return CreateResult(t) }, c.fail) {
		return nil
	}
	c.StartTask(t)
	return c.Reply(CreateResult(t))
}

// runCall calls the upstream and waits up to task_after: a call that
// answers sooner gets its answer; a call still running, or one whose answer
// the tool's mode makes a task, becomes one (convert). onTaskRuntime: the
// upstream runs tasks itself ([call.plainOnTaskRuntime]), so the call keeps the
// extension declared, and the upstream's CreateTaskResult is taken as the
// start of a followed task.
func (c *call) runCall(name string, mode task.Support, onTaskRuntime bool) error {
	id := task.NewTaskID()
	upstreamID := jsonrpc.UpstreamCallID(id, 1)
	params := c.Msg.Params
	if !onTaskRuntime {
		var err error
		if params, err = withoutTasksExtension(params); err != nil {
			c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
			return nil
		}
	}
	body, err := jsonrpc.RequestBytes(upstreamID, "tools/call", params)
	if err != nil {
		c.fail(rpcerr.InternalError(c.Log, "encoding the upstream call", err))
		return nil
	}
	run := c.Route.NewRun(c.Detach(c.R), c.Next)
	// decide fires at task_after, and, for a call that may make the
	// upstream's task, when the client leaves.
	decide := make(chan time.Time, 2)
	timer := time.AfterFunc(c.TaskAfter, func() { decide <- time.Now() })
	defer timer.Stop()
	stopFollowingClient := context.AfterFunc(c.R.Context(), func() {
		if onTaskRuntime {
			// Closing the call would cancel only the call: a task it
			// made runs on at the upstream (leftBeforeTask).
			decide <- time.Time{}
			return
		}
		run.Cancel(ErrClientGone)
	})
	a := upstream.StartAttempt(run.Ctx, run.Base, run.Next, upstreamID, body)
	reply := NewReply(c.Exchange)

	t := c.NewTask(task.Era2026, name, params, c.DefaultTTL)
	t.ID, t.UpstreamID = id, upstreamID
	passThrough := func(ev upstream.Event) error { return c.passAnswer(run, stopFollowingClient, reply, ev) }
	ev, answered := a.Until(run.Ctx, upstream.After(decide), relayTo(reply)) // no server-to-client requests on this wire
	switch {
	case !answered && onTaskRuntime:
		if !stopFollowingClient() {
			leftBeforeTask(c.Exchange, run, a, params)
			return nil
		}
		// The upstream has not answered yet: the gateway's task
		// follows the call, and a CreateTaskResult it ends with.
		t.UpstreamTask, t.UpstreamV2026 = true, true
		return c.convert(t, run, func() bool { return true }, reply, a, nil)
	case !answered:
		return c.convert(t, run, stopFollowingClient, reply, a, nil)
	case errors.Is(ev.Err, ErrClientGone):
		run.Release()
		return nil
	}
	if onTaskRuntime && ev.Final != nil && ev.Final.Error == nil {
		if created, ok := follow.ReadV2026Created(ev.Final.Result); ok {
			return c.adoptUpstreamTask(t, run, stopFollowingClient, reply, created)
		}
	}
	switch {
	case ev.Final != nil && upstream.IsInputRequired(ev.Final.Result):
		if mode == task.SupportRequired {
			return passThrough(ev)
		}
		if onTaskRuntime {
			// Input asked before the upstream's task (the guard
			// pattern): the retry with the answers may make one, which
			// the gateway's task then follows.
			t.UpstreamTask, t.UpstreamV2026 = true, true
		}
		return c.convert(t, run, stopFollowingClient, reply, nil, &ev)
	case ev.Head != nil && wire.RefusesCaller(ev.Head.Status):
		// Not an outcome of the tool: the caller must act on it
		// (MCP authorization starts from a 401), so it passes
		// through even for a tool that always runs as a task.
		return passThrough(ev)
	case mode == task.SupportRequired:
		return c.convert(t, run, stopFollowingClient, reply, nil, &ev)
	}
	return passThrough(ev)
}

// leftBeforeTask reads on, in the background, a, x's call whose client
// left before task_after, to an upstream that runs tasks itself: the
// upstream may have made its task already and would run it for nobody.
// The call is read for a bounded time (runtime.CancelLateV2026Create) and
// the task its CreateTaskResult names is cancelled; until then it counts
// against its owner's max_active_per_principal, as a plain client's call
// waiting on an upstream task does (runtime.InlineCalls).
func leftBeforeTask(x *wire.Exchange, run *runtime.Run, a *upstream.Attempt, params json.RawMessage) {
	release, _, _ := x.Runtime.Inline.Admit(x.CallerKey(), 0, nil) // counted, never refused: the task may exist already
	go func() {
		defer release()
		follow.CancelLateV2026Create(x.Log, a, func() {
			run.Cancel(ErrClientGone)
			run.Release()
		}, run.Base, run.Next, params)
	}()
}

// Convert makes a task of x's call, a 2026-07-28 call another package
// started (the version bridge's), as convert does for this package's.
func Convert(x *wire.Exchange, t *task.Task, run *runtime.Run, stopFollowingClient func() bool, reply *Reply, a *upstream.Attempt, pending *upstream.Event) error {
	return (&call{Exchange: x}).convert(t, run, stopFollowingClient, reply, a, pending)
}

// convert stores the task and answers the CreateTaskResult; a worker takes
// over the attempt (or its answer, pending). A pending final answer is
// recorded before the task is stored, so the task is created already ended.
func (c *call) convert(t *task.Task, run *runtime.Run, stopFollowingClient func() bool, reply *Reply, a *upstream.Attempt, pending *upstream.Event) error {
	if !stopFollowingClient() {
		run.Release() // the client left just now: the call was cancelled with it
		return nil
	}
	inputRequired := pending != nil && pending.Final != nil && upstream.IsInputRequired(pending.Final.Result)
	ended := pending != nil && !inputRequired
	waiting := false // the task is created waiting for input
	if inputRequired {
		// Recorded before the task is stored, so that the CreateTaskResult
		// says input_required and the worker only waits for the answers;
		// an answer it cannot read is left to the worker, which fails the
		// task with why.
		if in, err := runtime.ParseInputRequired(pending.Final.Result); err == nil && len(in.Requests) > 0 {
			if _, err := in.Apply(t, nil); err == nil {
				waiting, pending = true, nil
			}
		}
	}
	if ended {
		t.Lease = task.Lease{}
		if pending.Err != nil {
			runtime.ApplyOutcome(t, nil, rpcerr.UpstreamFailure(c.Log, pending.Err, zap.String("task", t.ID)), runtime.Now())
		} else {
			runtime.ApplyOutcome(t, pending.Final.Result, pending.Final.Error, runtime.Now())
		}
	}
	if err := c.CreateWithinLimits(t); err != nil {
		// The call does not go on untracked: the upstream call is cancelled.
		run.Cancel(err)
		run.Release()
		c.refuseCreate(reply, t, err)
		return nil
	}
	c.Route.AuditTask(runtime.AuditCreated, t)
	switch {
	case ended:
		run.Release()
		c.Route.AuditOutcome(t)
	case waiting:
		c.Route.AuditTask(runtime.AuditInputRequired, t)
		c.Route.StartWorker(t, run, nil, nil)
	default:
		c.Route.StartWorker(t, run, a, pending)
	}
	c.replyCreated(reply, t)
	return nil
}

// refuseCreate answers a call whose task the store did not take: the
// quota's refusal, or the store's error (503 when it is unavailable).
func (c *call) refuseCreate(reply *Reply, t *task.Task, err error) {
	if errors.Is(err, task.ErrQuotaExceeded) {
		e := c.QuotaRefused(err)
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), Status(e.Code))
		return
	}
	e := rpcerr.ClientError(c.Log, "storing a task", err, zap.String("task", t.ID))
	reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), wire.AnswerStatus(c.W, http.StatusInternalServerError, e))
}

// replyCreated answers the call with t's CreateTaskResult.
func (c *call) replyCreated(reply *Reply, t *task.Task) {
	data, err := jsonrpc.ResponseBytes(c.Msg.ID, CreateResult(t))
	if err != nil {
		data = jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.InternalError(c.Log, "encoding the task", err, zap.String("task", t.ID)))
	}
	reply.Send(data, http.StatusOK)
}

// passWithoutTasks passes a call that will not become a task through with
// the tasks extension taken out of its client capabilities: an upstream that
// knows the extension would otherwise make a task of it itself, which the
// gateway (forbidden tool, no room for a task) just decided against.
func (c *call) passWithoutTasks() error {
	params, err := withoutTasksExtension(c.Msg.Params)
	if err != nil || bytes.Equal(params, c.Msg.Params) {
		return c.Pass()
	}
	body, err := json.Marshal(jsonrpc.Message{JSONRPC: "2.0", ID: c.Msg.ID, Method: c.Msg.Method, Params: params})
	if err != nil {
		return c.Pass()
	}
	r := c.R.WithContext(c.R.Context())
	r.Header = c.R.Header.Clone()
	r.Header.Del("Content-Length")
	upstream.SetBody(r, body)
	return upstream.ServeNext(c.Next, c.W, r)
}

// withoutTasksExtension removes the tasks extension from the client
// capabilities the upstream sees: the gateway owns tasks, so an upstream
// that knows the extension must not make tasks of its own under it.
func withoutTasksExtension(params json.RawMessage) (json.RawMessage, error) {
	meta, ok := jsonx.Get(params, "_meta")
	if !ok {
		return params, nil
	}
	caps, ok := jsonx.Get(meta, wire.MetaClientCapabilities)
	if !ok {
		return params, nil
	}
	ext, ok := jsonx.Get(caps, "extensions")
	if !ok {
		return params, nil
	}
	ext, err := jsonx.Delete(ext, wire.ExtensionTasks)
	if err != nil {
		return nil, err
	}
	if caps, err = jsonx.Set(caps, "extensions", ext); err != nil {
		return nil, err
	}
	if meta, err = jsonx.Set(meta, wire.MetaClientCapabilities, caps); err != nil {
		return nil, err
	}
	return jsonx.Set(params, "_meta", meta)
}

// Reply is the answer to a call that may become a task. It starts as
// nothing; the first notification worth relaying (the call's progress and
// log messages, which belong on its own stream) turns it into an event
// stream, and the final message goes out as JSON or as the last event.
type Reply struct {
	x   *wire.Exchange
	sse *sse.Writer
}

// NewReply starts the answer to x.
func NewReply(x *wire.Exchange) *Reply { return &Reply{x: x} }

// Exchange is the request r answers.
func (r *Reply) Exchange() *wire.Exchange { return r.x }

// Relay passes the call's progress and log messages to the client.
func (r *Reply) Relay(m *jsonrpc.Message) {
	if m.Method != "notifications/progress" && m.Method != "notifications/message" {
		return
	}
	if r.sse == nil {
		if !wire.AcceptsSSE(r.x.R) {
			return
		}
		r.sse = sse.Start(r.x.W, 0)
	}
	if data, err := json.Marshal(m); err == nil {
		_ = r.sse.WriteEvent("", data)
	}
}

// SendUpstream answers with the upstream's own answer to a call that did
// not become a task, as a plain proxy would: its HTTP status and headers
// (an HTTP 401 with WWW-Authenticate is how MCP authorization discovery
// starts), and for a non-2xx answer its body as is, unless that body is a
// JSON-RPC message, which data (under the client's id) replaces.
func (r *Reply) SendUpstream(data []byte, status int, head *upstream.Head) {
	if head == nil || r.sse != nil { // a stream has begun: its status is sent
		r.Send(data, status)
		return
	}
	h := r.x.W.Header()
	for k, v := range head.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Content-Length", "Content-Type", "Content-Encoding", "Transfer-Encoding", "Connection", "Trailer":
			continue
		}
		h[k] = v
	}
	if head.Status < 200 || head.Status > 299 {
		if _, err := jsonrpc.Parse(head.Body); err != nil && head.Body != nil {
			if ct := head.Header.Get("Content-Type"); ct != "" {
				h.Set("Content-Type", ct)
			}
			h.Del("Content-Length")
			r.x.W.WriteHeader(head.Status)
			_, _ = r.x.W.Write(head.Body)
			return
		}
		status = head.Status
	}
	wire.WriteJSON(r.x.W, status, data)
}

// Send answers with data: the last event of a stream, or JSON with status.
func (r *Reply) Send(data []byte, status int) {
	if r.sse != nil {
		_ = r.sse.WriteEvent("", data)
		return
	}
	wire.WriteJSON(r.x.W, status, data)
}

// relayTo is an Attempt.Until handler that relays the call's
// notifications to reply and keeps no event.
func relayTo(reply *Reply) func(upstream.Event) bool {
	return func(ev upstream.Event) bool {
		if ev.Notification != nil {
			reply.Relay(ev.Notification)
		}
		return false
	}
}
