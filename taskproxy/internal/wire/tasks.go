package wire

import (
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What both wire adapters share: creating, storing and starting tasks,
// cancelling them, and answering failed lookups.

// ErrTaskNotFound is the one answer for unknown, expired and foreign ids.
func ErrTaskNotFound() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")
}

// LookupFailure maps a store error to the client's error. A task of another
// owner answers exactly as an unknown one; only the audit log records the
// denial.
func (c *Exchange) LookupFailure(id string, err error) *jsonrpc.Error {
	if errors.Is(err, task.ErrForeign) {
		c.Route.Audit(runtime.AuditDenied, id, nil, c.Caller)
	}
	return c.StoreFailure(err)
}

// StoreFailure maps a store error to the JSON-RPC error a client sees; an
// internal one is logged and answered with a reference only.
func (e *Env) StoreFailure(err error) *jsonrpc.Error {
	if errors.Is(err, task.ErrExpired) {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task has expired")
	}
	if errors.Is(err, task.ErrNotFound) {
		return ErrTaskNotFound()
	}
	return rpcerr.ClientError(e.Log, "task store", err)
}

// TaskIDParam reads params.taskId.
func (c *Exchange) TaskIDParam() (string, *jsonrpc.Error) {
	id, err := StringParam(c.Msg.Params, "taskId")
	if err != nil {
		return "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err)
	}
	return id, nil
}

// NewTask returns a working task record of the caller, leased to this
// process, with what a re-run would need of the request.
func (c *Exchange) NewTask(era task.Era, tool string, params json.RawMessage, ttl time.Duration) *task.Task {
	now := runtime.Now()
	id := task.NewTaskID()
	t := &task.Task{
		ID: id, Owner: c.Caller.Owner, Principal: c.Caller.Principal, Tenant: c.Caller.Tenant, Status: task.StatusWorking,
		CreatedAt: now, UpdatedAt: now, TTL: ttl, PollInterval: c.PollInterval,
		Era: era, Tool: tool, Params: params, UpstreamID: jsonrpc.UpstreamCallID(id, 1), Round: 1,
		Lease:    task.Lease{Holder: c.Runtime.Store.Holder(), Expires: now.Add(c.Runtime.Leases.TTL())},
		Endpoint: c.R.URL.RequestURI(), Host: c.R.Host, Headers: runtime.RoutingHeaders(c.R),
		Route: c.RouteName, UpstreamTask: c.Tools.UpstreamRunsTask(tool),
	}
	if c.EntryURI != nil {
		if uri := c.EntryURI(c.R); uri != "" && uri != t.Endpoint {
			t.EntryURI = uri
		}
	}
	if era == task.Era2025 {
		t.Session = c.R.Header.Get(upstream.HeaderSessionID)
	}
	if c.Owner == task.Anonymous {
		// Every caller without authentication is one owner: its tasks
		// count against the bounds per client address instead, so that
		// one client cannot use them up for all.
		t.QuotaKey = c.CallerKey()
	}
	t.IdempotencyKey, t.Fingerprint = gate.IdempotencyOf(c.R, c.Msg.Params)
	t.TraceParent, t.TraceState = runtime.TraceContextOf(c.R.Context())
	return t
}

// StoreTask stores a new task. It answers for itself, and returns false,
// when the store refuses: for an idempotent duplicate with the existing
// task, rendered by render.
func (c *Exchange) StoreTask(t *task.Task, render func(*task.Task) any, fail func(*jsonrpc.Error)) bool {
	err := c.CreateWithinLimits(t)
	var dup *task.DuplicateError
	switch {
	case err == nil:
		c.Route.AuditTask(runtime.AuditCreated, t)
		return true
	case errors.As(err, &dup):
		prev, err := c.Runtime.Store.Get(c.R.Context(), c.Owner, dup.TaskID)
		if err != nil {
			fail(c.StoreFailure(err))
			return false
		}
		_ = c.Reply(render(prev))
	case errors.Is(err, task.ErrIdempotencyMismatch):
		fail(gate.IdempotencyMismatch())
	case errors.Is(err, task.ErrQuotaExceeded):
		fail(c.QuotaRefused(err))
	default:
		fail(rpcerr.ClientError(c.Log, "storing a task", err, zap.String("task", t.ID)))
	}
	return false
}

// StartTask starts the worker of a stored task, making its first call.
func (c *Exchange) StartTask(t *task.Task) {
	run := c.Route.NewRun(c.Detach(c.R), c.Next)
	runtime.TraceRun(c.Route, t, run) // before the call, which carries its traceparent
	body, err := follow.UpstreamCallBody(t)
	if err != nil {
		run.Release()
		c.Route.Finish(t, nil, rpcerr.InternalError(c.Log, "encoding the upstream call", err, zap.String("task", t.ID)))
		return
	}
	c.Route.StartWorker(t, run, upstream.StartAttempt(run.Ctx, run.Base, run.Next, t.UpstreamID, body), nil)
}

// CheckQuota refuses a new task when the process is stopping (Draining)
// or the caller (CallerKey: anonymous callers by client address) has too
// many active ones. A create with an idempotency key
// is left to the store, which answers a repeat with its task even at the
// quota.
func (c *Exchange) CheckQuota() *jsonrpc.Error {
	if c.Runtime.Drain.Draining() {
		return c.Draining()
	}
	if c.MaxActivePerOwner <= 0 || gate.HasIdempotencyKey(c.R, c.Msg.Params) {
		return nil
	}
	ctx, quota := c.R.Context(), c.CallerKey() // the key only for a quota to count against
	n, err := c.Runtime.Store.CountActive(ctx, quota)
	if err != nil {
		return rpcerr.ClientError(c.Log, "counting active tasks", err)
	}
	n += c.uncounted(quota)
	if n >= c.MaxActivePerOwner {
		return c.QuotaRefused(&task.QuotaError{Limit: c.MaxActivePerOwner})
	}
	return nil
}

// MsgDraining is the error message of a call that would become a task on
// a process that stops.
const MsgDraining = "the gateway is stopping and takes no new tasks; retry the call (another replica takes it)"

// Draining answers a call that would become a task on a process that
// stops: HTTP 503 with Retry-After (where the status is still to be sent),
// which a load balancer retries on another replica, and a JSON-RPC error
// that says to retry. Nothing reached the upstream.
func (e *Env) Draining() *jsonrpc.Error {
	if e.Observer != nil {
		e.Observer.Refused("draining")
	}
	err := jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgDraining)
	err.Unavailable = true
	return err
}

// CreateWithinLimits stores t within the bounds (Limits) of its quota
// (task.Task.Quota). What this process has the upstream run for the quota
// outside the store's
// count (uncounted) counts as active too. A create with an idempotency key is bounded by the
// store alone, so that a repeat still finds its task.
func (c *Exchange) CreateWithinLimits(t *task.Task) error {
	l := c.Limits()
	if l.MaxActive > 0 && t.IdempotencyKey == "" {
		if d := c.uncounted(t.Quota()); d > 0 {
			if d >= l.MaxActive {
				return &task.QuotaError{Limit: l.MaxActive}
			}
			l.MaxActive -= d
		}
	}
	if err := c.Runtime.Store.CreateWithinLimits(c.R.Context(), t, l); err != nil {
		var q *task.QuotaError
		if errors.As(err, &q) && !q.Finished {
			q.Limit = c.Limits().MaxActive // the bound as configured
		}
		return err
	}
	return nil
}

// uncounted is how many tasks this process has running at the upstream
// for quota (an owner, or an anonymous caller's client address) that the
// store does not count as active: tasks that ended
// while the gateway still stops the upstream's
// (runtime.EndedStillUpstream), and
// plain clients' calls waiting on an upstream task (runtime.InlineCalls).
func (c *Exchange) uncounted(quota string) int {
	return c.Runtime.EndedStillUpstream(quota) + c.Runtime.Inline.Count(quota)
}

// AdmitInline admits a plain client's call that will wait on an upstream
// task within the call: it counts against max_active_per_principal as
// the caller's tasks do. It returns the slot's release, or the refusal
// to answer (the quota's, or the store's failure to count).
func (c *Exchange) AdmitInline() (func(), *jsonrpc.Error) {
	quota := c.CallerKey()
	release, ok, err := c.Runtime.Inline.Admit(quota, c.MaxActivePerOwner, func() (int, error) {
		n, err := c.Runtime.Store.CountActive(c.R.Context(), quota)
		return n + c.Runtime.EndedStillUpstream(quota), err
	})
	switch {
	case err != nil:
		return nil, rpcerr.ClientError(c.Log, "counting active tasks", err)
	case !ok:
		return nil, c.QuotaRefused(&task.QuotaError{Limit: c.MaxActivePerOwner})
	}
	return release, nil
}

// QuotaRefused counts and answers a create over a bound (err, a
// *QuotaError), on both wires. checkQuota is only the early answer: the
// store enforces the bounds atomically with the create
// (Store.CreateWithinLimits).
func (e *Env) QuotaRefused(err error) *jsonrpc.Error {
	if e.Observer != nil {
		e.Observer.Refused("quota")
	}
	if q, ok := errors.AsType[*task.QuotaError](err); ok {
		return jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "%s", q.Error())
	}
	return jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "too many active tasks (limit %d)", e.MaxActivePerOwner)
}

// Limits are the bounds of the tasks one owner keeps.
func (e *Env) Limits() task.Limits {
	return task.Limits{MaxActive: e.MaxActivePerOwner, MaxFinished: e.MaxFinishedPerOwner}
}
