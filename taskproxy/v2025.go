package taskproxy

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The 2025-11-25 wire adapter: requestor-driven tasks (params.task), the
// tasks/* methods, and input relayed on the tasks/result stream.

// v2025Task is the 2025-11-25 Task object.
type v2025Task struct {
	TaskID        string      `json:"taskId"`
	Status        task.Status `json:"status"`
	StatusMessage string      `json:"statusMessage,omitempty"`
	CreatedAt     string      `json:"createdAt"`
	LastUpdatedAt string      `json:"lastUpdatedAt"`
	TTL           int64       `json:"ttl"`
	PollInterval  int64       `json:"pollInterval,omitempty"`
}

const isoMillis = "2006-01-02T15:04:05.000Z07:00"

// appendJSON appends lt encoded as json.Marshal encodes it, byte for byte,
// without reflection: every create, and every tasks/get of a finished task
// once, encodes one.
func (lt v2025Task) appendJSON(b []byte) []byte {
	b = append(b, `{"taskId":`...)
	b, _ = jsonx.MarshalString(b, lt.TaskID)
	b = append(b, `,"status":`...)
	b, _ = jsonx.MarshalString(b, string(lt.Status))
	if lt.StatusMessage != "" {
		b = append(b, `,"statusMessage":`...)
		b, _ = jsonx.MarshalString(b, lt.StatusMessage)
	}
	b = append(b, `,"createdAt":`...)
	b, _ = jsonx.MarshalString(b, lt.CreatedAt)
	b = append(b, `,"lastUpdatedAt":`...)
	b, _ = jsonx.MarshalString(b, lt.LastUpdatedAt)
	b = append(b, `,"ttl":`...)
	b = strconv.AppendInt(b, lt.TTL, 10)
	if lt.PollInterval != 0 {
		b = append(b, `,"pollInterval":`...)
		b = strconv.AppendInt(b, lt.PollInterval, 10)
	}
	return append(b, '}')
}

func toV2025Task(t *task.Task) v2025Task {
	status := t.Status
	if status == task.StatusCompleted && t.IsError { // a 2026-07-28 task read on this wire
		status = task.StatusFailed
	}
	return v2025Task{
		TaskID:        t.ID,
		Status:        status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     t.CreatedAt.UTC().Format(isoMillis),
		LastUpdatedAt: t.UpdatedAt.UTC().Format(isoMillis),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// serveV2025ToolsCall applies the tool's task mode: a task-augmented call
// becomes a task, a plain one passes through.
func (c *call) serveV2025ToolsCall() error {
	params, err := paramsObject(c.msg.Params)
	if err != nil {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err))
		return nil
	}
	var name string
	_ = json.Unmarshal(params["name"], &name)
	taskMeta, augmented := params["task"]
	if augmented && string(taskMeta) == "null" {
		augmented = false
	}
	if augmented { // decided on what the upstream declares of the tool
		c.g.tools.learnToolsFor(c.r.Context(), c.r, c.next, name)
	}
	switch mode := c.g.tools.effectiveMode(name); {
	case augmented && mode == task.SupportForbidden:
		c.fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tool %q does not support task-augmented execution (taskSupport is forbidden)", name))
		return nil
	case !augmented && mode == task.SupportRequired:
		c.fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tool %q requires task augmentation: send params.task (taskSupport is required)", name))
		return nil
	case augmented:
		if !c.guardOrigin() {
			return nil
		}
		return c.createV2025Task(name, taskMeta)
	}
	return c.pass()
}

// serveCancelled routes a client's notifications/cancelled. Plain calls
// pass through with the client's own id, which is the id the upstream
// knows, so their cancellation passes through untouched, as a plain proxy
// would pass it. The ids the gateway made up for its own calls are not the
// client's to cancel (tasks are cancelled with tasks/cancel only).
func (c *call) serveCancelled() error {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(c.msg.Params, &p)
	if jsonrpc.IsGatewayID(p.RequestID) {
		c.w.WriteHeader(http.StatusAccepted)
		return nil
	}
	return c.pass()
}

// minTaskTTL is the shortest ttl a task is granted: a shorter request
// (but above zero) is raised to it.
const minTaskTTL = time.Second

// requestedTTL reads params.task.ttl (milliseconds) and applies the limits.
// The number is clamped while it is still a float: converted first, a huge
// ttl such as 1e13 overflows time.Duration into a negative one. A ttl that is
// not positive is refused; absent or null asks for the default.
func (g *Gateway) requestedTTL(taskMeta json.RawMessage) (time.Duration, error) {
	var meta struct {
		TTL *float64 `json:"ttl"`
	}
	if ttl, ok := plainTTLParam(taskMeta); ok {
		meta.TTL = ttl
	} else if err := json.Unmarshal(taskMeta, &meta); err != nil {
		return 0, errors.New("params.task must be an object")
	}
	if meta.TTL == nil {
		return g.cfg.DefaultTTL, nil
	}
	ms := *meta.TTL
	if !(ms > 0) { // also NaN, which JSON cannot carry but a float can
		return 0, errors.New("params.task.ttl must be a positive number of milliseconds")
	}
	maxMs := float64(g.cfg.MaxTTL) / float64(time.Millisecond)
	minMs := float64(min(minTaskTTL, g.cfg.MaxTTL)) / float64(time.Millisecond)
	ms = max(min(ms, maxMs), minMs)
	return min(time.Duration(ms*float64(time.Millisecond)), g.cfg.MaxTTL), nil
}

func (c *call) createV2025Task(tool string, taskMeta json.RawMessage) error {
	g := c.g
	ttl, err := g.requestedTTL(taskMeta)
	if err != nil {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err))
		return nil
	}
	if c.limited() { // creating a task is the most expensive operation
		return nil
	}
	if e := c.checkQuota(); e != nil {
		c.fail(e)
		return nil
	}
	params, err := jsonx.Delete(c.msg.Params, "task")
	if err != nil {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params: %v", err))
		return nil
	}
	t := c.newTask(task.Era2025, tool, params, ttl)
	if !c.storeTask(t, func(t *task.Task) any { return v2025Created(t) }, c.fail) {
		return nil
	}
	c.startTask(t)
	c.replyRaw(v2025Created(t))
	return nil
}

// v2025Created is the 2025-11-25 CreateTaskResult, encoded.
func v2025Created(t *task.Task) json.RawMessage {
	b := append(make([]byte, 0, 256), `{"task":`...)
	b = toV2025Task(t).appendJSON(b)
	return append(b, '}')
}

func (c *call) serveV2025Get() error {
	id, e := c.taskIDParam()
	if e != nil {
		c.fail(e)
		return nil
	}
	if c.serveCachedGet(id, runtime.WireV2025) {
		return nil
	}
	t, err := c.g.rt.Store.Get(c.r.Context(), c.owner, id)
	if err != nil {
		c.fail(c.lookupFailure(id, err))
		return nil
	}
	c.g.route.Audit(runtime.AuditRetrieved, id, t, c.caller)
	return c.replyView(t, runtime.WireV2025)
}

func (c *call) serveV2025List() error {
	if !c.g.cfg.ListTasks {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "tasks/list is not offered: callers are not authenticated, so tasks cannot be listed per caller"))
		return nil
	}
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if err := json.Unmarshal(jsonx.OrEmptyObject(c.msg.Params), &p); err != nil {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params: %v", err))
		return nil
	}
	cursor := ""
	if p.Cursor != nil {
		cursor = *p.Cursor
	}
	tasks, next, err := c.g.rt.Store.List(c.r.Context(), c.owner, cursor, listPageSize)
	if errors.Is(err, task.ErrInvalidCursor) {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid cursor"))
		return nil
	}
	if err != nil {
		c.fail(c.g.storeFailure(err))
		return nil
	}
	out := struct {
		Tasks      []v2025Task `json:"tasks"`
		NextCursor string      `json:"nextCursor,omitempty"`
	}{Tasks: make([]v2025Task, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, toV2025Task(t))
	}
	return c.reply(out)
}

const listPageSize = 50

func (c *call) serveV2025Cancel() error {
	id, e := c.taskIDParam()
	if e != nil {
		c.fail(e)
		return nil
	}
	t, err := c.g.route.CancelTask(c.r.Context(), c.owner, id, c.next)
	if errors.Is(err, task.ErrTerminal) {
		cur, gerr := c.g.rt.Store.Get(c.r.Context(), c.owner, id)
		if gerr != nil {
			c.fail(c.lookupFailure(id, gerr))
			return nil
		}
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Cannot cancel task: already in terminal status '%s'", cur.Status))
		return nil
	}
	if err != nil {
		c.fail(c.lookupFailure(id, err))
		return nil
	}
	return c.reply(toV2025Task(t))
}
