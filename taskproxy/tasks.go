package taskproxy

import (
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What both wire adapters share: creating, storing and starting tasks,
// cancelling them, and answering failed lookups.

// errTaskNotFound is the one answer for unknown, expired and foreign ids.
func errTaskNotFound() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")
}

// lookupFailure maps a store error to the client's error. A task of another
// owner answers exactly as an unknown one; only the audit log records the
// denial.
func (c *call) lookupFailure(id string, err error) *jsonrpc.Error {
	if errors.Is(err, task.ErrForeign) {
		c.g.route.Audit(runtime.AuditDenied, id, nil, c.caller)
	}
	return c.g.storeFailure(err)
}

// storeFailure maps a store error to the JSON-RPC error a client sees; an
// internal one is logged and answered with a reference only.
func (g *Gateway) storeFailure(err error) *jsonrpc.Error {
	if errors.Is(err, task.ErrExpired) {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task has expired")
	}
	if errors.Is(err, task.ErrNotFound) {
		return errTaskNotFound()
	}
	return runtime.ClientError(g.log, "task store", err)
}

func (c *call) taskIDParam() (string, *jsonrpc.Error) {
	id, err := stringParam(c.msg.Params, "taskId")
	if err != nil {
		return "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err)
	}
	return id, nil
}

// newTask returns a working task record of the caller, leased to this
// process, with what a re-run would need of the request.
func (c *call) newTask(era task.Era, tool string, params json.RawMessage, ttl time.Duration) *task.Task {
	now := clock()
	id := task.NewTaskID()
	t := &task.Task{
		ID: id, Owner: c.caller.Owner, Principal: c.caller.Principal, Tenant: c.caller.Tenant, Status: task.StatusWorking,
		CreatedAt: now, UpdatedAt: now, TTL: ttl, PollInterval: c.g.cfg.PollInterval,
		Era: era, Tool: tool, Params: params, UpstreamID: jsonrpc.UpstreamCallID(id, 1), Round: 1,
		Lease:    task.Lease{Holder: c.g.rt.Store.Holder(), Expires: now.Add(runtime.LeaseTTL)},
		Endpoint: c.r.URL.RequestURI(), Host: c.r.Host, Headers: runtime.RoutingHeaders(c.r),
		Route: c.g.cfg.Route, UpstreamTask: c.g.tools.upstreamRunsTask(tool),
	}
	if era == task.Era2025 {
		t.Session = c.r.Header.Get(upstream.HeaderSessionID)
	}
	t.IdempotencyKey, t.Fingerprint = gate.IdempotencyOf(c.r, c.msg.Params)
	return t
}

// storeTask stores a new task. It answers for itself, and returns false,
// when the store refuses: for an idempotent duplicate with the existing
// task, rendered by render.
func (c *call) storeTask(t *task.Task, render func(*task.Task) any, fail func(*jsonrpc.Error)) bool {
	err := c.g.rt.Store.CreateWithinLimits(c.r.Context(), t, c.g.limits())
	var dup *task.DuplicateError
	switch {
	case err == nil:
		c.g.route.AuditTask(runtime.AuditCreated, t)
		return true
	case errors.As(err, &dup):
		prev, err := c.g.rt.Store.Get(c.r.Context(), c.owner, dup.TaskID)
		if err != nil {
			fail(c.g.storeFailure(err))
			return false
		}
		_ = c.reply(render(prev))
	case errors.Is(err, task.ErrIdempotencyMismatch):
		fail(gate.IdempotencyMismatch())
	case errors.Is(err, task.ErrQuotaExceeded):
		fail(c.g.quotaRefused(err))
	default:
		fail(runtime.ClientError(c.g.log, "storing a task", err, zap.String("task", t.ID)))
	}
	return false
}

// startTask starts the worker of a stored task, making its first call.
func (c *call) startTask(t *task.Task) {
	g := c.g
	run := g.route.NewRun(g.cfg.Detach(c.r), c.next)
	body, err := runtime.UpstreamCallBody(t)
	if err != nil {
		run.Release()
		g.route.Finish(t, nil, runtime.InternalError(g.log, "encoding the upstream call", err, zap.String("task", t.ID)))
		return
	}
	g.route.StartWorker(t, run, upstream.StartAttempt(run.Ctx, run.Base, run.Next, t.UpstreamID, body), nil)
}

// checkQuota refuses a new task when the caller has too many active ones.
// A create with an idempotency key is left to the store, which answers a
// repeat with its task even at the quota.
func (c *call) checkQuota() *jsonrpc.Error {
	g, ctx, owner := c.g, c.r.Context(), c.owner
	if g.cfg.MaxActivePerOwner <= 0 || gate.HasIdempotencyKey(c.r, c.msg.Params) {
		return nil
	}
	n, err := g.rt.Store.CountActive(ctx, owner)
	if err != nil {
		return runtime.ClientError(g.log, "counting active tasks", err)
	}
	if n >= g.cfg.MaxActivePerOwner {
		return g.quotaRefused(&task.QuotaError{Limit: g.cfg.MaxActivePerOwner})
	}
	return nil
}

// quotaRefused counts and answers a create over a bound (err, a
// *QuotaError), on both wires. checkQuota is only the early answer: the
// store enforces the bounds atomically with the create
// (Store.CreateWithinLimits).
func (g *Gateway) quotaRefused(err error) *jsonrpc.Error {
	if g.cfg.Observer != nil {
		g.cfg.Observer.Refused("quota")
	}
	var q *task.QuotaError
	if errors.As(err, &q) {
		return jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "%s", q.Error())
	}
	return jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "too many active tasks (limit %d)", g.cfg.MaxActivePerOwner)
}

// limits are the bounds of the tasks one owner keeps.
func (g *Gateway) limits() task.Limits {
	return task.Limits{MaxActive: g.cfg.MaxActivePerOwner, MaxFinished: g.cfg.MaxFinishedPerOwner}
}
