package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
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
//   - the client goes away first: the upstream call is cancelled.

var errClientGone = errors.New("the client closed its request before the call became a task")

func (c *call) serveV2026ToolsCall() error {
	meta, e := readRequestMeta(c.msg.Params)
	if e != nil {
		return c.pass() // malformed for this wire: the upstream's to judge
	}
	var name string
	if n, err := stringParam(c.msg.Params, "name"); err == nil {
		name = n
	}
	mode := c.g.tools.effectiveMode(name)
	declared := meta.declaresTasks()
	if !declared && c.plainOnTaskRuntime(mode) { // v2026_followed.go
		return c.serveV2026PlainOnTaskRuntime()
	}
	switch {
	case !declared && mode == task.SupportRequired:
		if c.validV2026(false) {
			c.failV2026(errMissingTasksCapability("tool " + name + " runs only as a task"))
		}
		return nil
	case !declared || mode == task.SupportForbidden:
		return c.passWithoutTasks()
	}
	if !c.validV2026(true) || !c.guardOrigin() || c.limited() {
		return nil
	}
	if e := c.checkQuota(); e != nil {
		c.failV2026(e) // the same refusal as on the 2025-11-25 wire
		return nil
	}
	if c.upstreamRunsV2026Tasks() { // v2026_followed.go
		return c.runV2026OnTaskRuntime(name, mode)
	}
	if key, _ := gate.IdempotencyOf(c.r, c.msg.Params); key != "" || c.g.tools.upstreamRunsTask(name) {
		return c.runIdempotentCall(name)
	}
	return c.runV2026Call(name, mode, false)
}

// runIdempotentCall serves a call with an idempotency key: it becomes a task
// at once, before the upstream is called, so that a repeat of it finds the
// task and no second call is made. A call of a tool the upstream runs as a
// task itself (upstreamtask.go) is served the same way: its task is created
// at the upstream and followed.
func (c *call) runIdempotentCall(name string) error {
	params, err := withoutTasksExtension(c.msg.Params)
	if err != nil {
		c.failV2026(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return nil
	}
	t := c.newTask(task.Era2026, name, params, c.g.cfg.DefaultTTL)
	if !c.storeTask(t, func(t *task.Task) any { return toV2026Create(t) }, c.failV2026) {
		return nil
	}
	c.startTask(t)
	return c.reply(toV2026Create(t))
}

// runV2026Call calls the upstream and waits up to task_after: a call that
// answers sooner gets its answer; a call still running, or one whose answer
// the tool's mode makes a task, becomes one (convert). onTaskRuntime: the
// upstream runs tasks itself (v2026_followed.go), so the call keeps the
// extension declared, and the upstream's CreateTaskResult is taken as the
// start of a followed task.
func (c *call) runV2026Call(name string, mode task.Support, onTaskRuntime bool) error {
	g := c.g
	id := task.NewTaskID()
	upstreamID := jsonrpc.UpstreamCallID(id, 1)
	params := c.msg.Params
	if !onTaskRuntime {
		var err error
		if params, err = withoutTasksExtension(params); err != nil {
			c.failV2026(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
			return nil
		}
	}
	body, err := jsonrpc.RequestBytes(upstreamID, "tools/call", params)
	if err != nil {
		c.failV2026(runtime.InternalError(g.log, "encoding the upstream call", err))
		return nil
	}
	run := g.route.NewRun(g.cfg.Detach(c.r), c.next)
	stopFollowingClient := context.AfterFunc(c.r.Context(), func() { run.Cancel(errClientGone) })
	a := upstream.StartAttempt(run.Ctx, run.Base, run.Next, upstreamID, body)
	reply := &v2026Reply{c: c}
	timer := time.NewTimer(g.cfg.TaskAfter)
	defer timer.Stop()

	t := c.newTask(task.Era2026, name, params, g.cfg.DefaultTTL)
	t.ID, t.UpstreamID = id, upstreamID
	passThrough := func(ev upstream.Event) error { return c.passV2026Answer(run, stopFollowingClient, reply, ev) }
	for {
		select {
		case ev, ok := <-a.Events:
			if !ok {
				ev = upstream.Event{Err: context.Cause(run.Ctx)}
			}
			switch {
			case ev.Notification != nil:
				reply.relay(ev.Notification)
				continue
			case ev.Request != nil:
				continue // no server-to-client requests on this wire
			case errors.Is(ev.Err, errClientGone):
				run.Release()
				return nil
			}
			if onTaskRuntime && ev.Final != nil && ev.Final.Error == nil {
				if created, ok := runtime.ReadV2026Created(ev.Final.Result); ok {
					return c.adoptV2026UpstreamTask(t, run, stopFollowingClient, reply, created)
				}
			}
			switch {
			case ev.Final != nil && upstream.IsInputRequired(ev.Final.Result):
				if mode == task.SupportRequired {
					return passThrough(ev)
				}
				return c.convert(t, run, stopFollowingClient, reply, nil, &ev)
			case ev.Head != nil && refusesCaller(ev.Head.Status):
				// Not an outcome of the tool: the caller must act on it
				// (MCP authorization starts from a 401), so it passes
				// through even for a tool that always runs as a task.
				return passThrough(ev)
			case mode == task.SupportRequired:
				return c.convert(t, run, stopFollowingClient, reply, nil, &ev)
			}
			return passThrough(ev)
		case <-timer.C:
			if onTaskRuntime {
				// The upstream has not answered yet: the gateway's task
				// follows the call, and a CreateTaskResult it ends with.
				t.UpstreamTask, t.UpstreamV2026 = true, true
			}
			return c.convert(t, run, stopFollowingClient, reply, a, nil)
		}
	}
}

// refusesCaller reports whether an upstream HTTP status refuses the caller
// rather than answering the call: 401 and 403.
func refusesCaller(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// convert stores the task and answers the CreateTaskResult; a worker takes
// over the attempt (or its answer, pending). A pending final answer is
// recorded before the task is stored, so the task is created already ended.
func (c *call) convert(t *task.Task, run *runtime.Run, stopFollowingClient func() bool, reply *v2026Reply, a *upstream.Attempt, pending *upstream.Event) error {
	g := c.g
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
			runtime.ApplyOutcome(t, nil, runtime.UpstreamFailure(g.log, pending.Err, zap.String("task", t.ID)), clock())
		} else {
			runtime.ApplyOutcome(t, pending.Final.Result, pending.Final.Error, clock())
		}
	}
	if err := g.rt.Store.CreateWithinLimits(c.r.Context(), t, g.limits()); err != nil {
		// The call does not go on untracked: the upstream call is cancelled.
		run.Cancel(err)
		run.Release()
		c.refuseV2026Create(reply, t, err)
		return nil
	}
	g.route.AuditTask(runtime.AuditCreated, t)
	switch {
	case ended:
		run.Release()
		g.route.AuditOutcome(t)
	case waiting:
		g.route.AuditTask(runtime.AuditInputRequired, t)
		g.route.StartWorker(t, run, nil, nil)
	default:
		g.route.StartWorker(t, run, a, pending)
	}
	c.replyV2026Created(reply, t)
	return nil
}

// refuseV2026Create answers a call whose task the store did not take: the
// quota's refusal, or the store's error (503 when it is unavailable).
func (c *call) refuseV2026Create(reply *v2026Reply, t *task.Task, err error) {
	if errors.Is(err, task.ErrQuotaExceeded) {
		e := c.g.quotaRefused(err)
		reply.send(jsonrpc.ErrorBytes(c.msg.ID, e), v2026Status(e.Code))
		return
	}
	e := runtime.ClientError(c.g.log, "storing a task", err, zap.String("task", t.ID))
	reply.send(jsonrpc.ErrorBytes(c.msg.ID, e), answerStatus(c.w, http.StatusInternalServerError, e))
}

// replyV2026Created answers the call with t's CreateTaskResult.
func (c *call) replyV2026Created(reply *v2026Reply, t *task.Task) {
	data, err := jsonrpc.ResponseBytes(c.msg.ID, toV2026Create(t))
	if err != nil {
		data = jsonrpc.ErrorBytes(c.msg.ID, runtime.InternalError(c.g.log, "encoding the task", err, zap.String("task", t.ID)))
	}
	reply.send(data, http.StatusOK)
}

// passWithoutTasks passes a call that will not become a task through with
// the tasks extension taken out of its client capabilities: an upstream that
// knows the extension would otherwise make a task of it itself, which the
// gateway (forbidden tool, no room for a task) just decided against.
func (c *call) passWithoutTasks() error {
	params, err := withoutTasksExtension(c.msg.Params)
	if err != nil || bytes.Equal(params, c.msg.Params) {
		return c.pass()
	}
	body, err := json.Marshal(jsonrpc.Message{JSONRPC: "2.0", ID: c.msg.ID, Method: c.msg.Method, Params: params})
	if err != nil {
		return c.pass()
	}
	r := c.r.WithContext(c.r.Context())
	r.Header = c.r.Header.Clone()
	r.Header.Del("Content-Length")
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	return upstream.ServeNext(c.next, c.w, r)
}

// withoutTasksExtension removes the tasks extension from the client
// capabilities the upstream sees: the gateway owns tasks, so an upstream
// that knows the extension must not make tasks of its own under it.
func withoutTasksExtension(params json.RawMessage) (json.RawMessage, error) {
	meta, ok := jsonx.Get(params, "_meta")
	if !ok {
		return params, nil
	}
	caps, ok := jsonx.Get(meta, metaClientCapabilities)
	if !ok {
		return params, nil
	}
	ext, ok := jsonx.Get(caps, "extensions")
	if !ok {
		return params, nil
	}
	ext, err := jsonx.Delete(ext, extensionTasks)
	if err != nil {
		return nil, err
	}
	if caps, err = jsonx.Set(caps, "extensions", ext); err != nil {
		return nil, err
	}
	if meta, err = jsonx.Set(meta, metaClientCapabilities, caps); err != nil {
		return nil, err
	}
	return jsonx.Set(params, "_meta", meta)
}

// v2026Reply is the answer to a call that may become a task. It starts as
// nothing; the first notification worth relaying (the call's progress and
// log messages, which belong on its own stream) turns it into an event
// stream, and the final message goes out as JSON or as the last event.
type v2026Reply struct {
	c   *call
	sse *sse.Writer
}

func (r *v2026Reply) relay(m *jsonrpc.Message) {
	if m.Method != "notifications/progress" && m.Method != "notifications/message" {
		return
	}
	if r.sse == nil {
		if !acceptsSSE(r.c.r) {
			return
		}
		r.sse = sse.Start(r.c.w, 0)
	}
	if data, err := json.Marshal(m); err == nil {
		_ = r.sse.WriteEvent("", data)
	}
}

// sendUpstream answers with the upstream's own answer to a call that did
// not become a task, as a plain proxy would: its HTTP status and headers
// (an HTTP 401 with WWW-Authenticate is how MCP authorization discovery
// starts), and for a non-2xx answer its body as is, unless that body is a
// JSON-RPC message, which data (under the client's id) replaces.
func (r *v2026Reply) sendUpstream(data []byte, status int, head *upstream.Head) {
	if head == nil || r.sse != nil { // a stream has begun: its status is sent
		r.send(data, status)
		return
	}
	h := r.c.w.Header()
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
			r.c.w.WriteHeader(head.Status)
			_, _ = r.c.w.Write(head.Body)
			return
		}
		status = head.Status
	}
	writeJSON(r.c.w, status, data)
}

func (r *v2026Reply) send(data []byte, status int) {
	if r.sse != nil {
		_ = r.sse.WriteEvent("", data)
		return
	}
	writeJSON(r.c.w, status, data)
}
