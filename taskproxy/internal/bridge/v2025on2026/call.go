package v2025on2026

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// errCancelledByClient ends a call the client cancelled with
// notifications/cancelled.
var errCancelledByClient = errors.New("the client cancelled the request")

// forward sends the request upstream in 2026-07-28 form and answers with
// the upstream's answer in 2025-11-25 form. A tools/call the upstream
// refuses for want of the tasks extension is sent again declaring it, and
// the upstream's task is awaited within the call (awaitTask).
func (c *call) forward() error {
	meta, ok := c.requestMeta()
	if !ok {
		return nil
	}
	params, err := translate.V2026Params(c.Msg.Params, meta)
	if err != nil {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return nil
	}
	ctx, cancel := context.WithCancelCause(c.R.Context())
	defer cancel(nil)
	if c.sid != "" {
		key, entry := inflightKey(c.sid, c.Msg.ID), &inflightCall{cancel: cancel}
		c.b.inflight.Store(key, entry)
		defer c.b.inflight.CompareAndDelete(key, entry)
	}
	base := c.upstreamBase(c.Msg.Method, params)
	rep := newReply(c.Exchange)
	ev := c.attempt(ctx, base, c.Msg.Method, params, rep)
	retry := func(p json.RawMessage) (upstream.Event, bool) {
		return c.attempt(ctx, base, c.Msg.Method, p, rep), false
	}
	if c.Msg.Method == "tools/call" && ctx.Err() == nil && needsTasksExtension(ev) && !c.forbidden(params) {
		var done bool
		if ev, params, done = c.callAsTask(ctx, rep, base, params); done {
			return nil
		}
		// The upstream asked for input before making its task (the
		// guard pattern): any retry with the answers may make it, so
		// each goes as the call declaring the extension went.
		retry = func(p json.RawMessage) (upstream.Event, bool) { return c.taskCall(ctx, rep, base, p) }
	}
	if mrtrMethods[c.Msg.Method] && ctx.Err() == nil {
		var e *jsonrpc.Error // the retries repeat the params of the call answered, extension and all
		var done bool
		if ev, done, e = c.answerRounds(ctx, rep, params, ev, retry); done {
			return nil
		}
		if e != nil && ctx.Err() == nil {
			rep.send(jsonrpc.ErrorBytes(c.Msg.ID, e))
			return nil
		}
	}
	if ctx.Err() != nil {
		return nil // the client left or cancelled: the upstream stream was closed, which cancels the call
	}
	c.sendFinal(rep, ev)
	return nil
}

// forbidden reports whether the tool of a tools/call with params is
// configured forbidden as a task: it goes without the tasks extension, as
// on 2026-07-28, and the upstream's refusal stands.
func (c *call) forbidden(params json.RawMessage) bool {
	name, ok := routingName("tools/call", params)
	return ok && c.Tools.EffectiveMode(name) == task.SupportForbidden
}

// mrtrMethods are the requests a 2026-07-28 server may answer with an
// InputRequiredResult.
var mrtrMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// needsTasksExtension reports whether ev is the upstream's -32021 refusal
// naming the tasks extension: the tool runs only as a task.
func needsTasksExtension(ev upstream.Event) bool {
	if ev.Err != nil || ev.Final == nil || ev.Final.Error == nil || ev.Final.Error.Code != jsonrpc.CodeMissingRequiredClientCapability {
		return false
	}
	var data struct {
		RequiredCapabilities struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		} `json:"requiredCapabilities"`
	}
	if json.Unmarshal(ev.Final.Error.Data, &data) != nil {
		return false
	}
	_, ok := data.RequiredCapabilities.Extensions[wire.ExtensionTasks]
	return ok
}

// callAsTask sends again a tools/call the upstream runs only as a task,
// declaring the tasks extension, and answers it with the task's outcome
// (awaitTask); done reports that the call was answered (or its client
// left). Otherwise it returns the upstream's answer to the call sent again
// and the params it went with. The upstream's task runs for the caller as
// a gateway task would: within rate_limit and max_active_per_principal
// (its slot held until the task ends or is cancelled), bounded by the
// tool's run_timeout, and audited; its creating call runs detached from the
// client, so that a client leaving before the upstream names its task
// still gets that task cancelled (follow.PlainV2026TaskCall).
func (c *call) callAsTask(ctx context.Context, rep *reply, base *http.Request, params json.RawMessage) (ev upstream.Event, sent json.RawMessage, done bool) {
	ext, err := jsonx.SetPath(params, []string{"_meta", wire.MetaClientCapabilities, "extensions", wire.ExtensionTasks}, []byte("{}"))
	if err != nil {
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.InternalError(c.Log, "declaring the tasks extension", err)))
		return ev, params, true
	}
	withExt := json.RawMessage(ext) // sent as it is, not as a byte string
	if c.Limited() {
		return ev, params, true
	}
	ev, done = c.taskCall(ctx, rep, base, withExt)
	return ev, withExt, done
}

// taskCall sends withExt, a tools/call declaring the tasks extension (the
// first, or a retry with the answers to input the upstream asked before
// making its task), admitted as one of the caller's active tasks, and
// answers it with the outcome of the task it makes (awaitTask); done
// reports that the call was answered (or its client left). Otherwise it
// returns the upstream's answer, and the slot is given back.
func (c *call) taskCall(ctx context.Context, rep *reply, base *http.Request, withExt json.RawMessage) (ev upstream.Event, done bool) {
	release, e := c.AdmitInline()
	if e != nil {
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, e))
		return ev, true
	}
	id, _ := json.Marshal(jsonrpc.GatewayIDPrefix + "v2025on2026:" + task.NewTaskID() + ":2")
	body, err := jsonrpc.RequestBytes(id, "tools/call", withExt)
	if err != nil {
		release()
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.InternalError(c.Log, "encoding the task call", err)))
		return ev, true
	}
	ev, left := follow.PlainV2026TaskCall(ctx, c.Log, base, c.Next, id, withExt, body, rep.on, release)
	if left {
		return ev, true // the slot is given back in the background
	}
	if ev.Err == nil && ev.Final.Error == nil {
		if created, ok := follow.ReadV2026Created(ev.Final.Result); ok {
			name, _ := routingName("tools/call", withExt)
			pt := &plainTask{rec: follow.PlainTaskRecord(c.Caller, name, created.TaskID), release: release, limit: c.RunTimeoutOf(name)}
			c.Route.AuditTask(follow.AuditPlainCreated, pt.rec)
			c.awaitTask(ctx, rep, base, withExt, created, pt)
			return ev, true
		}
	}
	release()
	return ev, false
}

// errRunTimeout ends the wait of a call on an upstream task whose tool ran
// for its run_timeout.
var errRunTimeout = errors.New("run timeout")

// plainTask is the upstream task a client's plain call waits on.
type plainTask struct {
	// rec is what the audit log says of it.
	rec *task.Task
	// release gives back the call's slot among its owner's active tasks.
	release func()
	// limit is the tool's run_timeout (0: none); spent is how much of it
	// the waits on the task took (the client's input aside).
	limit, spent time.Duration
}

// await waits for the task (follow.AwaitV2026UpstreamTask) for at most
// what remains of its run_timeout; errRunTimeout says that the run_timeout
// ended the wait, and cancelled the upstream's task.
func (pt *plainTask) await(ctx context.Context, c *call, base *http.Request, params json.RawMessage, created follow.V2026Created, answered map[string]json.RawMessage) (follow.InlineOutcome, error) {
	if pt.limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, pt.limit-pt.spent, errRunTimeout)
		defer cancel()
		defer func(start time.Time) { pt.spent += time.Since(start) }(time.Now())
	}
	return follow.AwaitV2026UpstreamTask(ctx, c.Log, base, c.Next, params, created, answered)
}

// finish audits how the upstream's task ended (status) and gives back the
// call's slot.
func (pt *plainTask) finish(c *call, status task.Status) {
	pt.rec.Status, pt.rec.UpdatedAt = status, runtime.Now()
	c.Route.AuditTask(follow.AuditPlainEnded, pt.rec)
	pt.release()
}

// awaitTask waits, within the client's call, for the task the upstream
// made of it, and answers with the task's outcome. When the client goes
// first, AwaitV2026UpstreamTask cancels the upstream's task; so does the
// tool's run_timeout, which fails the call as it fails a task.
func (c *call) awaitTask(ctx context.Context, rep *reply, base *http.Request, params json.RawMessage, created follow.V2026Created, pt *plainTask) {
	var answered map[string]json.RawMessage
	out, err := pt.await(ctx, c, base, params, created, nil)
	for round := 0; err == nil && out.Input != nil && ctx.Err() == nil; round++ {
		// The task asks for input: the client is asked on the call's
		// stream ([inputRound]), and its answers go to the task.
		e := jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream's task asked for input more than %d times", maxInputRounds)
		if round < maxInputRounds {
			if answered, e = c.ask(ctx, rep, out.Input); e == nil {
				if aerr := follow.AnswerV2026UpstreamTask(ctx, base, c.Next, params, created.TaskID, answered); aerr != nil {
					e = rpcerr.UpstreamFailure(c.Log, aerr)
				}
			}
		}
		if e != nil {
			follow.CancelV2026UpstreamTask(ctx, base, c.Next, params, created.TaskID)
			pt.finish(c, task.StatusCancelled)
			if ctx.Err() == nil {
				rep.send(jsonrpc.ErrorBytes(c.Msg.ID, e))
			}
			return
		}
		out, err = pt.await(ctx, c, base, params, created, answered)
	}
	switch {
	case errors.Is(err, errRunTimeout) && ctx.Err() == nil:
		pt.finish(c, task.StatusFailed)
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", runtime.RunTimeoutMessage(pt.limit))))
	case ctx.Err() != nil:
		if err == nil && out.Input != nil {
			// The client left between the task's question and its being
			// asked: nobody will answer it.
			follow.CancelV2026UpstreamTask(ctx, base, c.Next, params, created.TaskID)
		}
		pt.finish(c, task.StatusCancelled)
	case err != nil:
		pt.finish(c, task.StatusFailed)
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.UpstreamFailure(c.Log, err)))
	case out.Error != nil:
		pt.finish(c, task.StatusFailed)
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, out.Error))
	default:
		pt.finish(c, task.StatusCompleted)
		rep.send(jsonrpc.ResponseRaw(c.Msg.ID, translate.V2025Result(out.Result)))
	}
}

// upstreamBase is the request the upstream calls of method are built on:
// a detached copy of the caller's (setUpstreamHeaders).
func (c *call) upstreamBase(method string, params json.RawMessage) *http.Request {
	base := c.Detach(c.R)
	setUpstreamHeaders(base, method, params)
	return base
}

// setUpstreamHeaders makes r's headers those of a 2026-07-28 request of
// method: the caller's (its credentials) without the session and the
// stream's resumption, with the 2026-07-28 routing headers.
func setUpstreamHeaders(r *http.Request, method string, params json.RawMessage) {
	for k := range r.Header {
		if upstream.IsRoutingHeader(k) {
			delete(r.Header, k)
		}
	}
	r.Header.Del(upstream.HeaderSessionID)
	r.Header.Del("Last-Event-ID")
	r.Header.Set(upstream.HeaderProtocolVersion, string(task.Era2026))
	r.Header.Set(upstream.HeaderMethod, method)
	if name, ok := routingName(method, params); ok {
		r.Header.Set(upstream.HeaderName, upstream.EncodeHeaderValue(name))
	}
}

// routingName is the Mcp-Name of a request: params.name of tools/call and
// prompts/get, params.uri of resources/read.
func routingName(method string, params json.RawMessage) (string, bool) {
	var field string
	switch method {
	case "tools/call", "prompts/get":
		field = "name"
	case "resources/read":
		field = "uri"
	default:
		return "", false
	}
	name, err := wire.StringParam(params, field)
	return name, err == nil
}

// attempt sends method with params upstream, on base, relaying the
// request's progress and log messages to rep, and returns its last event.
func (c *call) attempt(ctx context.Context, base *http.Request, method string, params json.RawMessage, rep *reply) upstream.Event {
	id, _ := json.Marshal(jsonrpc.GatewayIDPrefix + "v2025on2026:" + task.NewTaskID() + ":" + strconv.Itoa(1))
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		return upstream.Event{Err: err}
	}
	ev, _ := upstream.StartAttempt(ctx, base, c.Next, id, body).Until(ctx, nil, rep.on)
	return ev
}

// sendFinal answers with ev, the last event of an upstream request, in
// 2025-11-25 form: a result without the 2026-07-28 fields, an error with
// HTTP 200 as a 2025-11-25 server sends it, the upstream's refusal of the
// caller (401, 403) as it is (MCP authorization starts from it), and 502
// when there was no answer.
func (c *call) sendFinal(rep *reply, ev upstream.Event) {
	switch {
	case ev.Err != nil:
		e := rpcerr.UpstreamFailure(c.Log, ev.Err)
		if rep.sse == nil {
			wire.WriteError(c.W, http.StatusBadGateway, c.Msg.ID, e)
			return
		}
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, e))
	case rep.refused(ev):
		rep.passRefusal(ev.Head)
	case ev.Final.Error != nil:
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, ev.Final.Error))
	case upstream.IsInputRequired(ev.Final.Result): // of a method that may not ask (answerRounds serves those that may)
		rep.send(jsonrpc.ErrorBytes(c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError,
			"the upstream asks for input to answer %s, which no server may ask for", c.Msg.Method)))
	default:
		result := translate.V2025Result(ev.Final.Result)
		if c.Msg.Method == "tools/list" { // each tool's task mode, as for any upstream
			if out, err := c.Tools.RewriteToolsList(result); err == nil {
				result = out
			}
		}
		rep.send(jsonrpc.ResponseRaw(c.Msg.ID, result))
	}
}

// reply is the answer to a bridged request: JSON, or an event stream once
// a progress or log message is relayed.
type reply struct {
	x   *wire.Exchange
	sse *sse.Writer
}

func newReply(x *wire.Exchange) *reply { return &reply{x: x} }

// on relays an upstream request's event to the client: its progress and
// log messages.
func (r *reply) on(ev upstream.Event) bool {
	if ev.Notification != nil {
		r.relay(ev.Notification)
	}
	return false // the upstream sends no requests on 2026-07-28; anything else is dropped
}

// relay passes the request's progress and log messages to the client.
func (r *reply) relay(m *jsonrpc.Message) {
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

// request sends the client data, a JSON-RPC request of the gateway's, on
// the event stream (started here when need be: the caller checked that the
// client takes one).
func (r *reply) request(data []byte) {
	if r.sse == nil {
		r.sse = sse.Start(r.x.W, 0)
	}
	_ = r.sse.WriteEvent("", data)
}

// send answers with data, a JSON-RPC response: the last event of a
// stream, or JSON with HTTP 200.
func (r *reply) send(data []byte) {
	if r.sse != nil {
		_ = r.sse.WriteEvent("", data)
		return
	}
	wire.WriteJSON(r.x.W, http.StatusOK, data)
}

// refused reports whether ev is the upstream refusing the caller (401,
// 403) before any stream began.
func (r *reply) refused(ev upstream.Event) bool {
	return r.sse == nil && ev.Err == nil && ev.Head != nil && wire.RefusesCaller(ev.Head.Status)
}

// passRefusal answers with the upstream's refusal: its status, its
// authentication challenge, and its body.
func (r *reply) passRefusal(head *upstream.Head) {
	h := r.x.W.Header()
	for _, k := range []string{"WWW-Authenticate", "Content-Type"} {
		if v := head.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	r.x.W.WriteHeader(head.Status)
	_, _ = r.x.W.Write(head.Body)
}
