package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A bridged call: one 2026-07-28 request sent as 2025-11-25 on the caller's
// upstream session. For tools/call the upstream may ask the client for
// input (elicitation, sampling, roots) on the call's stream while the call
// stays open:
//
//   - when the client declared the tasks extension and the tool may run as
//     a task, the call becomes a task in input_required: its inputRequests
//     are answered with tasks/update, which the gateway sends the upstream
//     as the responses to its requests ([runtime.Route.AnswerUpstream]), and the task's worker
//     follows the same upstream call to its end;
//   - otherwise the client gets input_required with inputRequests and a
//     requestState naming the call, which the gateway keeps open; the
//     client's retry with inputResponses (and that requestState) answers
//     the upstream's requests and takes over the rest of the call.
//
// A call that outlives task_after becomes a task as any 2026-07-28 call.

// bridgeParkTimeout is how long a call waiting for the client's retry
// with inputResponses is kept open before it is cancelled upstream.
const bridgeParkTimeout = 5 * time.Minute

type bridgedCall struct {
	b       *Bridge
	method  string
	session *bridgeSession
	meta    v2026.RequestMeta
	run     *runtime.Run
	a       *upstream.Attempt
	// id names the call: the task id should it become one.
	id         string
	upstreamID json.RawMessage
	body       []byte
	params     json.RawMessage
	restarted  bool
	// unhold stops the release of the session at the end of the run.
	unhold func() bool
	// logLevel is the request's _meta logLevel: without one, 2026-07-28
	// sends no notifications/message for the request.
	logLevel string
}

// logLevels ranks the syslog severities MCP logging uses.
var logLevels = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7}

// relay passes a notification of the request to the client: progress, and
// log messages at or above the level the request asked for.
func (bc *bridgedCall) relay(reply *v2026.Reply, m *jsonrpc.Message) {
	if m.Method == "notifications/message" {
		want, ok := logLevels[bc.logLevel]
		if !ok {
			return
		}
		var p struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(m.Params, &p) != nil || logLevels[p.Level] < want {
			return
		}
	}
	reply.Relay(m)
}

// startBridged acquires the caller's session and starts the request on it.
func (c *call) startBridged(meta v2026.RequestMeta, method string) (*bridgedCall, *jsonrpc.Error) {
	s, err := c.acquireBridgeSession(meta)
	if err != nil {
		return nil, rpcerr.UpstreamFailure(c.Log, fmt.Errorf("opening the upstream session: %w", err))
	}
	bc := &bridgedCall{b: c.b, method: method, session: s, meta: meta, id: task.NewTaskID(), params: translate.V2025Params(c.Msg.Params)}
	if lvl, ok := jsonx.Get(jsonx.GetOr(c.Msg.Params, "_meta"), translate.MetaLogLevel); ok {
		_ = json.Unmarshal(lvl, &bc.logLevel)
	}
	bc.upstreamID = jsonrpc.UpstreamCallID(bc.id, 1)
	if bc.body, err = jsonrpc.RequestBytes(bc.upstreamID, method, bc.params); err != nil {
		s.release()
		return nil, rpcerr.InternalError(c.Log, "encoding the upstream request", err)
	}
	base := c.Detach(c.R)
	base.Header.Del(upstream.HeaderMethod)
	base.Header.Del(upstream.HeaderName)
	bc.setSession(base, s)
	bc.run = c.Route.NewRun(base, c.Next)
	// The session is held as long as the call runs, task or not.
	bc.unhold = context.AfterFunc(bc.run.Ctx, s.release)
	bc.a = upstream.StartAttempt(bc.run.Ctx, bc.run.Base, bc.run.Next, bc.upstreamID, bc.body)
	return bc, nil
}

func (bc *bridgedCall) setSession(base *http.Request, s *bridgeSession) {
	if s.id != "" {
		base.Header.Set(upstream.HeaderSessionID, s.id)
	} else {
		base.Header.Del(upstream.HeaderSessionID)
	}
	base.Header.Set(upstream.HeaderProtocolVersion, s.version)
}

// sessionLost reports whether ev is the upstream saying it no longer knows
// the call's session (upstream.SessionLost), which a re-initialized session
// cures, once.
func (bc *bridgedCall) sessionLost(ev upstream.Event) bool {
	return !bc.restarted && bc.session.id != "" && upstream.SessionLost(ev)
}

// restart opens a new session in place of the lost one and sends the
// request again on it.
func (bc *bridgedCall) restart(c *call) *jsonrpc.Error {
	bc.restarted = true
	bc.b.sessions.drop(bc.session)
	bc.b.Log.Info("version bridge: the upstream dropped a session; re-initializing", zap.String("upstream_session", bc.session.id))
	s, err := c.acquireBridgeSession(bc.meta)
	if err != nil {
		return rpcerr.UpstreamFailure(bc.b.Log, fmt.Errorf("re-opening the upstream session: %w", err))
	}
	if bc.unhold() {
		bc.session.release()
	}
	bc.session = s
	bc.unhold = context.AfterFunc(bc.run.Ctx, s.release)
	bc.setSession(bc.run.Base, s)
	bc.a = upstream.StartAttempt(bc.run.Ctx, bc.run.Base, bc.run.Next, bc.upstreamID, bc.body)
	return nil
}

// refuseUpstreamRequest answers an upstream request that cannot reach the
// client: a ping is answered, anything else refused.
func (bc *bridgedCall) refuseUpstreamRequest(m *jsonrpc.Message) {
	answer := runtime.InputAnswer{Result: json.RawMessage("{}")}
	if m.Method != "ping" {
		answer = runtime.InputAnswer{Error: jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "%s is not available through the version bridge during %s", m.Method, bc.method)}
	}
	// The run's context and base are read here, not in the goroutine:
	// the call may become a task meanwhile, whose worker gives the run
	// its traced ones (runtime.TraceRun).
	ctx, base := bc.run.Ctx, bc.run.Base
	go func() { _ = bc.answerOn(ctx, base, m.ID, answer) }()
}

// answer sends the upstream the response to one of its requests.
func (bc *bridgedCall) answer(ctx context.Context, id json.RawMessage, answer runtime.InputAnswer) error {
	return bc.answerOn(ctx, bc.run.Base, id, answer)
}

// answerOn is answer made from base.
func (bc *bridgedCall) answerOn(ctx context.Context, base *http.Request, id json.RawMessage, answer runtime.InputAnswer) error {
	return bc.b.Route.AnswerUpstream(ctx, &task.Task{Session: bc.session.id}, base, bc.run.Next, id, answer)
}

// sendFinal answers the client with the upstream's last event, translated.
func (bc *bridgedCall) sendFinal(reply *v2026.Reply, ev upstream.Event) {
	c := reply.Exchange()
	if ev.Err != nil {
		if errors.Is(ev.Err, upstream.ErrStreamBroke) {
			// The gateway gave the call up (its stream broke and could
			// not be resumed); the 2025-11-25 upstream takes a lost
			// stream for no cancellation and would run it on for nobody.
			bc.cancelUpstream("the gateway lost the call's event stream")
		}
		e := rpcerr.UpstreamFailure(bc.b.Log, ev.Err)
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), http.StatusBadGateway)
		return
	}
	if e := translate.Error(ev.Final.Error); e != nil {
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), v2026.Status(e.Code))
		return
	}
	if bc.method == "tools/list" {
		bc.b.Tools.Caps.LearnTools(ev.Final.Result) // what the upstream runs as its own task
	}
	data, err := json.Marshal(jsonrpc.Message{JSONRPC: "2.0", ID: c.Msg.ID, Result: translate.Result(bc.method, ev.Final.Result, bc.session.serverInfo)})
	if err != nil {
		e := rpcerr.InternalError(bc.b.Log, "encoding a result", err)
		data = jsonrpc.ErrorBytes(c.Msg.ID, e)
	}
	reply.Send(data, http.StatusOK)
}

// cancelUpstream tells the upstream the call is cancelled: on 2025-11-25
// closing the stream is not a cancellation.
func (bc *bridgedCall) cancelUpstream(reason string) {
	bc.b.Route.NotifyUpstreamCancelled(bc.run.Ctx, bc.run, &task.Task{ID: bc.id, UpstreamID: bc.upstreamID, Session: bc.session.id}, reason)
}

// serveBridgedToolsCall serves a tools/call through the bridge: a retry of
// a call waiting for input, or a new call.
func (c *call) serveBridgedToolsCall(meta v2026.RequestMeta) error {
	name, _ := wire.StringParam(c.Msg.Params, "name")
	declared := meta.DeclaresTasks()
	state, _ := wire.StringParam(c.Msg.Params, "requestState")
	if state == "" {
		// A tool the upstream runs as its own task is followed there
		// ([call.serveBridgedUpstreamTask]); what the upstream runs is learned on the
		// caller's session.
		s, err := c.acquireBridgeSession(meta)
		if err != nil {
			c.fail(rpcerr.UpstreamFailure(c.Log, fmt.Errorf("opening the upstream session: %w", err)))
			return nil
		}
		if c.bridgedRunsUpstreamTask(s, name) && declared && c.Tools.EffectiveMode(name) != task.SupportForbidden {
			defer s.release()
			return c.serveBridgedUpstreamTask(s, name)
		}
		s.release()
	}
	mode := c.Tools.EffectiveMode(name)
	if !declared && mode == task.SupportRequired {
		c.fail(v2026.ErrMissingTasksCapability("tool " + name + " runs only as a task"))
		return nil
	}
	canTask := declared && mode != task.SupportForbidden
	if state != "" {
		return c.resumeBridgedCall(state, canTask, mode)
	}
	// Every new call counts against the rate limit, task or not: a call
	// that waits for input holds an upstream call and session.
	if c.Limited() {
		return nil
	}
	if canTask {
		if e := c.CheckQuota(); e != nil {
			c.fail(e)
			return nil
		}
	}
	bc, e := c.startBridged(meta, "tools/call")
	if e != nil {
		c.fail(e)
		return nil
	}
	return bc.follow(c, name, canTask, mode)
}

// follow consumes the call's events for the client request c until the
// call ends, becomes a task, or waits for the client's input.
func (bc *bridgedCall) follow(c *call, name string, canTask bool, mode task.Support) error {
	run := bc.run
	stopFollowingClient := context.AfterFunc(c.R.Context(), func() {
		bc.cancelUpstream("the client closed its request")
		run.Cancel(v2026.ErrClientGone)
	})
	reply := v2026.NewReply(c.Exchange)
	var timerC <-chan time.Time
	if canTask {
		timer := time.NewTimer(c.TaskAfter)
		defer timer.Stop()
		timerC = timer.C
	}
	newTask := func() *task.Task {
		t := c.NewTask(task.Era2026, name, bc.params, c.DefaultTTL)
		t.ID, t.UpstreamID, t.Session = bc.id, bc.upstreamID, bc.session.id
		t.Headers[upstream.HeaderProtocolVersion] = bc.session.version // what its call speaks (taskCallHeaders)
		return t
	}
	// An upstream request other than a ping is a decision point: the
	// call becomes a task, or waits for the client's retry.
	keepRequests := func(m *jsonrpc.Message) bool { return m.Method != "ping" }
	for {
		ev, ok := bc.a.Until(run.Ctx, upstream.After(timerC), bc.relayOrRefuse(reply, keepRequests))
		switch {
		case !ok: // task_after passed
			return v2026.Convert(c.Exchange, newTask(), run, stopFollowingClient, reply, bc.a, nil)
		case ev.Request != nil && canTask:
			t := newTask()
			t.AddInput(task.InputRequest{Method: ev.Request.Method, Params: ev.Request.Params, UpstreamID: ev.Request.ID})
			_ = t.SetStatus(task.StatusInputRequired, runtime.MsgBridgedInput, runtime.Now())
			return v2026.Convert(c.Exchange, t, run, stopFollowingClient, reply, bc.a, nil)
		case ev.Request != nil:
			return bc.park(c, reply, stopFollowingClient, ev.Request)
		case errors.Is(ev.Err, v2026.ErrClientGone):
			run.Release()
			return nil
		case bc.sessionLost(ev):
			if e := bc.restart(c); e != nil {
				stopFollowingClient()
				run.Release()
				reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), v2026.Status(e.Code))
				return nil
			}
			continue
		case canTask && mode == task.SupportRequired && !(ev.Head != nil && wire.RefusesCaller(ev.Head.Status)):
			t := newTask()
			if ev.Final != nil && ev.Final.Error == nil {
				final := *ev.Final
				final.Result = runtime.BridgedResult(t, final.Result)
				ev.Final = &final
			}
			return v2026.Convert(c.Exchange, t, run, stopFollowingClient, reply, nil, &ev)
		}
		stopFollowingClient()
		run.Release()
		bc.sendFinal(reply, ev)
		return nil
	}
}

// relayOrRefuse is an Attempt.Until handler for a bridged call: it relays
// the call's notifications, and answers the upstream's requests itself
// (refuseUpstreamRequest) unless keep takes them (nil keeps none).
func (bc *bridgedCall) relayOrRefuse(reply *v2026.Reply, keep func(*jsonrpc.Message) bool) func(upstream.Event) bool {
	return func(ev upstream.Event) bool {
		switch {
		case ev.Notification != nil:
			bc.relay(reply, ev.Notification)
		case ev.Request == nil:
		case keep != nil && keep(ev.Request):
			return true
		default:
			bc.refuseUpstreamRequest(ev.Request)
		}
		return false
	}
}

// parkedCall is a call waiting for the client's retry with inputResponses.
type parkedCall struct {
	bc      *bridgedCall
	owner   string
	name    string
	pending map[string]*jsonrpc.Message // by input key: the upstream's request
	nextKey int
	timer   *time.Timer
}

// parkedCalls holds them by requestState, and counts them per owner.
type parkedCalls struct {
	mu      sync.Mutex
	calls   map[string]*parkedCall
	byOwner map[string]int
}

func newParkedCalls() *parkedCalls {
	return &parkedCalls{calls: map[string]*parkedCall{}, byOwner: map[string]int{}}
}

// removeLocked forgets the call of state.
func (p *parkedCalls) removeLocked(state string, pc *parkedCall) {
	delete(p.calls, state)
	if p.byOwner[pc.owner]--; p.byOwner[pc.owner] <= 0 {
		delete(p.byOwner, pc.owner)
	}
}

// take removes and returns the owner's call of state.
func (p *parkedCalls) take(state, owner string) (*parkedCall, bool) {
	pc, ok, _ := p.takeCall(state, owner, nil)
	return pc, ok
}

// takeCall is take for a retry of a call of tool *name (nil: any tool): a
// call of another tool is left parked and reported as otherName, since the
// retry's mode and task decisions are made for the name it carries.
func (p *parkedCalls) takeCall(state, owner string, name *string) (pc *parkedCall, ok, otherName bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc, ok = p.calls[state]
	if !ok || pc.owner != owner {
		return nil, false, false
	}
	if name != nil && pc.name != *name {
		return nil, false, true
	}
	p.removeLocked(state, pc)
	pc.timer.Stop()
	return pc, true, false
}

// maxParkedCalls bounds the calls waiting for input on one route, a
// backstop behind the per-owner bound.
const maxParkedCalls = 1024

// DefaultParkedPerOwner bounds one owner's calls waiting for input when
// max_active_per_principal is not set: each holds an upstream call, and
// one principal must not fill the route's room.
const DefaultParkedPerOwner = 16

// park answers the client input_required for the upstream's request m and
// keeps the call open for the retry.
func (bc *bridgedCall) park(c *call, reply *v2026.Reply, stopFollowingClient func() bool, m *jsonrpc.Message) error {
	if !stopFollowingClient() {
		bc.run.Release()
		return nil
	}
	pc := &parkedCall{bc: bc, owner: c.Owner, pending: map[string]*jsonrpc.Message{}}
	pc.name, _ = wire.StringParam(c.Msg.Params, "name")
	return bc.b.parkAndReply(c, reply, pc, m)
}

func (b *Bridge) parkAndReply(c *call, reply *v2026.Reply, pc *parkedCall, m *jsonrpc.Message) error {
	bc := pc.bc
	if m != nil {
		pc.nextKey++
		pc.pending["input-"+strconv.Itoa(pc.nextKey)] = m
	}
	state := task.NewTaskID()
	p := b.parked
	p.mu.Lock()
	if limit := b.maxParkedPerOwner; p.byOwner[pc.owner] >= limit {
		p.mu.Unlock()
		bc.cancelUpstream("too many calls of the principal wait for input")
		bc.run.Release()
		if o := b.Observer; o != nil {
			o.Refused("bridge_input")
		}
		e := jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "too many calls wait for input for this principal (limit %d); answer or abandon one first", limit)
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), v2026.Status(e.Code))
		return nil
	}
	if len(p.calls) >= maxParkedCalls {
		p.mu.Unlock()
		bc.cancelUpstream("too many calls wait for input")
		bc.run.Release()
		e := jsonrpc.Errorf(jsonrpc.CodeInternalError, "too many calls wait for input (limit %d)", maxParkedCalls)
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), http.StatusServiceUnavailable)
		return nil
	}
	pc.timer = time.AfterFunc(bridgeParkTimeout, func() {
		if _, ok := p.take(state, pc.owner); ok {
			bc.cancelUpstream("the client did not answer the input requests in time")
			bc.run.Release()
		}
	})
	p.calls[state] = pc
	p.byOwner[pc.owner]++
	p.mu.Unlock()
	requests := map[string]any{}
	for k, req := range pc.pending {
		requests[k] = struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params,omitempty"`
		}{req.Method, req.Params}
	}
	data, err := jsonrpc.ResponseBytes(c.Msg.ID, map[string]any{"resultType": "input_required", "inputRequests": requests, "requestState": state})
	if err != nil {
		data = jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.InternalError(b.Log, "encoding input_required", err))
	}
	reply.Send(data, http.StatusOK)
	return nil
}

// resumeBridgedCall serves the retry of a call that waits for input: the
// answers go to the upstream as the responses to its requests, and the
// call goes on for this request.
func (c *call) resumeBridgedCall(state string, canTask bool, mode task.Support) error {
	name, _ := wire.StringParam(c.Msg.Params, "name")
	pc, ok, otherName := c.b.parked.takeCall(state, c.Owner, &name)
	if otherName {
		// The tool's mode decided canTask for name: the parked call of
		// another tool must not run under it.
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: the requestState belongs to a call of another tool; retry with that call's name"))
		return nil
	}
	if !ok {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: requestState is unknown or expired; call the tool again without it"))
		return nil
	}
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(c.Msg.Params, &p); err != nil {
		p.InputResponses = nil
	}
	bc := pc.bc
	for key, req := range pc.pending {
		answer, ok := p.InputResponses[key]
		if !ok {
			continue
		}
		if err := bc.answer(c.R.Context(), req.ID, runtime.InputAnswer{Result: answer}); err != nil {
			bc.cancelUpstream("the answer could not be sent")
			bc.run.Release()
			c.fail(rpcerr.UpstreamFailure(c.Log, err))
			return nil
		}
		delete(pc.pending, key)
	}
	if len(pc.pending) > 0 { // some still unanswered: ask again
		return c.b.parkAndReply(c, v2026.NewReply(c.Exchange), pc, nil)
	}
	return bc.follow(c, pc.name, canTask, mode)
}
