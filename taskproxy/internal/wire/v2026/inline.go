package v2026

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Input for a client without the tasks extension, of a tool the upstream
// runs only as a task ([call.plainOnTaskRuntime]): the upstream's task asks for input,
// and the client gets it as any 2026-07-28 server asks a plain call, an
// InputRequiredResult with a requestState. The client's retry of the call,
// with inputResponses and that requestState, sends the answers to the
// upstream's task (tasks/update) and waits for it again. What the retry
// needs is held here, by requestState, for the owner and tool of the call;
// a requestState the gateway did not make is the upstream's own and
// passes on.

// inlineWaitTimeout is how long an upstream task waits for the client's
// retry before the gateway cancels it, as the version bridge does with
// calls waiting for input.
const inlineWaitTimeout = 5 * time.Minute

// maxInlineWaits bounds the waits of one configuration, a backstop behind
// the per-owner bound.
const maxInlineWaits = 1024

// errInlineRunTimeout ends the wait of a plain client's call on an
// upstream task whose tool ran for its run_timeout.
var errInlineRunTimeout = errors.New("run timeout")

// Handler serves the 2026-07-28 requests of one configuration; it holds
// the plain clients' calls whose upstream task waits for their input.
type Handler struct {
	perOwner int
	mu       sync.Mutex
	waits    map[string]*inlineWait // by requestState
	byOwner  map[string]int
}

// inlineWait is one upstream task waiting for a plain client's answers.
type inlineWait struct {
	owner, tool    string
	upstreamTaskID string
	pollMs         int64
	pollErr        error // why pollMs is not what the upstream sent, if it is not
	// params are the call's params (with the extension declared); base
	// and next send the upstream's tasks/cancel when the wait ends unanswered.
	params json.RawMessage
	// answered are the answers last sent: the upstream may still list
	// their requests until it has taken them.
	answered map[string]json.RawMessage
	base     *http.Request
	next     http.Handler
	timer    *time.Timer
	// runLeft is what remains of the tool's run_timeout (0: none); it
	// runs while the call waits on the upstream's task, not while it
	// waits for the client's retry.
	runLeft, runLimit time.Duration
	// release gives back the call's slot among the owner's active tasks
	// (wire.Exchange.AdmitInline) once the upstream's task has ended or
	// been cancelled; it is held while the call waits for a retry.
	release func()
	// rec is what the audit log says of the upstream's task, the
	// gateway's own being none; audit logs it (nil: no audit).
	rec   *task.Task
	audit func(event string, t *task.Task)
}

// finish audits how the upstream's task ended (status) and gives back the
// call's slot; once, whoever calls it.
func (w *inlineWait) finish(status task.Status) {
	if w.rec != nil && w.audit != nil && !w.rec.Status.Terminal() {
		w.rec.Status, w.rec.UpdatedAt = status, runtime.Now()
		w.audit(follow.AuditPlainEnded, w.rec)
	}
	w.release()
}

// NewHandler returns the handler of a configuration whose owners may each
// have perOwner calls waiting for input.
func NewHandler(perOwner int) *Handler {
	return &Handler{perOwner: perOwner, waits: map[string]*inlineWait{}, byOwner: map[string]int{}}
}

// Close cancels the upstream tasks still waiting for a client's retry: the
// configuration goes, and its requestStates with it. The cancels go out
// in the background: a configuration's cleanup must not wait on upstreams.
func (h *Handler) Close() {
	h.mu.Lock()
	waits := h.waits
	h.waits, h.byOwner = map[string]*inlineWait{}, map[string]int{}
	h.mu.Unlock()
	for _, w := range waits {
		w.timer.Stop()
		go w.cancelUpstream()
	}
}

// cancelUpstream sends the upstream tasks/cancel for the waiting task, on
// the context of the detached request it came with: the next handler
// (Caddy's reverse_proxy) needs that context's values to send anything.
func (w *inlineWait) cancelUpstream() {
	follow.CancelV2026UpstreamTask(w.base.Context(), w.base, w.next, w.params, w.upstreamTaskID)
	w.finish(task.StatusCancelled)
}

// park holds w for the owner's retry and returns its requestState, or
// refuses when the owner (or the configuration) holds too many.
func (h *Handler) park(w *inlineWait) (string, *jsonrpc.Error) {
	state := task.NewTaskID()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byOwner[w.owner] >= h.perOwner {
		return "", jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "too many calls wait for input for this principal (limit %d); answer or abandon one first", h.perOwner)
	}
	if len(h.waits) >= maxInlineWaits {
		return "", jsonrpc.Errorf(jsonrpc.CodeInternalError, "too many calls wait for input (limit %d)", maxInlineWaits)
	}
	w.timer = time.AfterFunc(inlineWaitTimeout, func() {
		if w, ok := h.take(state, w.owner, w.tool); ok {
			w.cancelUpstream()
		}
	})
	h.waits[state] = w
	h.byOwner[w.owner]++
	return state, nil
}

// take removes and returns the owner's wait of state for a call of tool.
func (h *Handler) take(state, owner, tool string) (*inlineWait, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w, ok := h.waits[state]
	if !ok || w.owner != owner || w.tool != tool {
		return nil, false
	}
	delete(h.waits, state)
	if h.byOwner[owner]--; h.byOwner[owner] <= 0 {
		delete(h.byOwner, owner)
	}
	w.timer.Stop()
	return w, true
}

// awaitInline waits for the upstream's task created for the plain client's
// call and answers the call: with the task's outcome, or with its input
// requests and a requestState for the retry.
func (c *call) awaitInline(reply *Reply, w *inlineWait) error {
	ctx := c.R.Context()
	if w.runLimit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, w.runLeft, errInlineRunTimeout)
		defer cancel()
		defer func(start time.Time) { w.runLeft -= time.Since(start) }(time.Now())
	}
	out, err := follow.AwaitV2026UpstreamTask(ctx, c.Log, w.base, c.Next, w.params, follow.V2026Created{TaskID: w.upstreamTaskID, PollIntervalMs: w.pollMs, PollIntervalErr: w.pollErr}, w.answered)
	switch { // the upstream's task ended, or was cancelled
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), errInlineRunTimeout):
		w.finish(task.StatusCancelled)
	case ctx.Err() != nil || err != nil || out.Error != nil:
		w.finish(task.StatusFailed)
	case out.Input == nil:
		w.finish(task.StatusCompleted)
	}
	switch {
	case errors.Is(context.Cause(ctx), errInlineRunTimeout):
		// The upstream's task was cancelled; the call fails as a task
		// stopped by its run_timeout does.
		e := jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", runtime.RunTimeoutMessage(w.runLimit))
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), http.StatusOK)
		return nil
	case ctx.Err() != nil:
		return nil // the client left; the upstream's task was cancelled
	case err != nil:
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.UpstreamFailure(c.Log, err)), http.StatusBadGateway)
		return nil
	case out.Input != nil:
		state, e := c.h.park(w)
		if e != nil {
			w.cancelUpstream()
			if o := c.Observer; o != nil {
				o.Refused("inline_input")
			}
			reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), Status(e.Code))
			return nil
		}
		data, err := jsonrpc.ResponseBytes(c.Msg.ID, map[string]any{"resultType": "input_required", "inputRequests": out.Input, "requestState": state})
		if err != nil {
			data = jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.InternalError(c.Log, "encoding input_required", err))
		}
		reply.Send(data, http.StatusOK)
		return nil
	}
	data, _ := json.Marshal(jsonrpc.Message{JSONRPC: "2.0", ID: c.Msg.ID, Result: out.Result, Error: out.Error})
	reply.Send(data, http.StatusOK)
	return nil
}

// resumeInline serves the retry of a call whose upstream task waits for
// the client's input: its answers go to the upstream's task, and the call
// waits for the task again.
func (c *call) resumeInline(w *inlineWait) error {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(c.Msg.Params, &p); err != nil || p.InputResponses == nil {
		w.cancelUpstream()
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: a retry with requestState needs inputResponses"))
		return nil
	}
	if len(p.InputResponses) > runtime.MaxInputResponses {
		w.cancelUpstream()
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses has more than %d answers", runtime.MaxInputResponses))
		return nil
	}
	// The retry's own headers (its credentials) from here on.
	w.base = c.Detach(c.R)
	w.next = c.Next
	if err := follow.AnswerV2026UpstreamTask(c.R.Context(), w.base, c.Next, w.params, w.upstreamTaskID, p.InputResponses); err != nil {
		w.cancelUpstream()
		c.fail(rpcerr.UpstreamFailure(c.Log, err))
		return nil
	}
	w.answered = p.InputResponses
	return c.awaitInline(NewReply(c.Exchange), w)
}

// inlineRetry returns the wait a plain client's tools/call of tool
// resumes, when its requestState is one the gateway made for the caller.
func (c *call) inlineRetry(tool string) (*inlineWait, bool) {
	if c.h == nil {
		return nil, false
	}
	state, err := wire.StringParam(c.Msg.Params, "requestState")
	if err != nil {
		return nil, false
	}
	return c.h.take(state, c.UpstreamOwner(), tool)
}
