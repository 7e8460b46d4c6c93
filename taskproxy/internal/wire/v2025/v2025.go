package v2025

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// call is one 2025-11-25 request.
type call struct{ *wire.Exchange }

// Serve answers a 2025-11-25 request: the task methods and task-augmented
// tools/call itself, initialize and tools/list passed through with what
// the gateway serves added, anything else passed through.
func Serve(x *wire.Exchange) error {
	c := &call{x}
	if strings.HasPrefix(c.Msg.Method, "tasks/") && (!c.GuardOrigin() || c.Limited()) {
		return nil
	}
	switch c.Msg.Method {
	case "initialize":
		// Every initialize costs a durable session binding (and, through
		// the reverse bridge, a kept session): it counts against the rate.
		if c.Limited() {
			return nil
		}
		c.W = c.Sessions.BindOf(c.R.Context(), c.W, c.Owner) // before the answer names the session
		return c.PassRewriting(c.Tools.RewriteInitialize)
	case "tools/list":
		c.Tools.Caps.Recall(c.R.Context()) // whether the modes the upstream declares hold
		return c.PassRewriting(c.Tools.RewriteToolsList)
	case "tools/call":
		return c.serveToolsCall()
	case "tasks/get":
		return c.serveGet()
	case "tasks/result":
		return c.serveResult()
	case "tasks/list":
		return c.serveList()
	case "tasks/cancel":
		return c.serveCancel()
	}
	return c.Pass()
}

// Task is the 2025-11-25 Task object.
type Task struct {
	TaskID        string      `json:"taskId"`
	Status        task.Status `json:"status"`
	StatusMessage string      `json:"statusMessage,omitempty"`
	CreatedAt     string      `json:"createdAt"`
	LastUpdatedAt string      `json:"lastUpdatedAt"`
	TTL           int64       `json:"ttl"`
	PollInterval  int64       `json:"pollInterval,omitempty"`
}

// AppendJSON appends lt encoded as json.Marshal encodes it, byte for byte,
// without reflection: every create, and every tasks/get of a finished task
// once, encodes one.
func (lt Task) AppendJSON(b []byte) []byte {
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

// AppendTask appends Render(t) encoded as its AppendJSON encodes it, with
// the times written in place rather than formatted into strings first:
// every create answer and every first tasks/get of a finished task
// encodes one.
func AppendTask(b []byte, t *task.Task) []byte {
	b = append(b, `{"taskId":`...)
	b, _ = jsonx.MarshalString(b, t.ID)
	b = append(b, `,"status":`...)
	b, _ = jsonx.MarshalString(b, string(renderedStatus(t)))
	if t.StatusMessage != "" {
		b = append(b, `,"statusMessage":`...)
		b, _ = jsonx.MarshalString(b, t.StatusMessage)
	}
	// A time in wire.ISOMillis has digits, '-', ':', 'T', '.', 'Z' and,
	// past year 9999, '+': nothing JSON escapes.
	b = append(b, `,"createdAt":"`...)
	b = t.CreatedAt.UTC().AppendFormat(b, wire.ISOMillis)
	b = append(b, `","lastUpdatedAt":"`...)
	b = t.UpdatedAt.UTC().AppendFormat(b, wire.ISOMillis)
	b = append(b, `","ttl":`...)
	b = strconv.AppendInt(b, t.TTL.Milliseconds(), 10)
	if ms := t.PollInterval.Milliseconds(); ms != 0 {
		b = append(b, `,"pollInterval":`...)
		b = strconv.AppendInt(b, ms, 10)
	}
	return append(b, '}')
}

// renderedStatus is t's status on this wire.
func renderedStatus(t *task.Task) task.Status {
	if t.Status == task.StatusCompleted && t.IsError { // a 2026-07-28 task read on this wire
		return task.StatusFailed
	}
	return t.Status
}

// Render is t as the 2025-11-25 Task object.
func Render(t *task.Task) Task {
	return Task{
		TaskID:        t.ID,
		Status:        renderedStatus(t),
		StatusMessage: t.StatusMessage,
		CreatedAt:     t.CreatedAt.UTC().Format(wire.ISOMillis),
		LastUpdatedAt: t.UpdatedAt.UTC().Format(wire.ISOMillis),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// serveToolsCall applies the tool's task mode: a task-augmented call
// becomes a task, a plain one passes through.
func (c *call) serveToolsCall() error {
	tc, ok := CheckToolCall(c.Exchange, true)
	switch {
	case !ok:
		return nil
	case tc.Augmented:
		if !c.GuardOrigin() {
			return nil
		}
		return c.createTask(tc.Name, tc.TaskMeta)
	}
	return c.Pass()
}

// ToolCall is a 2025-11-25 tools/call as its tool's task mode takes it.
type ToolCall struct {
	// Name is the tool's.
	Name string
	// TaskMeta is params.task, when Augmented: the client asks for a task.
	TaskMeta  json.RawMessage
	Augmented bool
}

// read takes the tool's name and params.task from params, as
// encoding/json reads them from params decoded into an object (the last
// member of a name, its key unescaped; a name that is not a string is ""),
// scanning the members in place: a call's arguments, often most of its
// bytes, are not decoded. Params that are absent or null name nothing;
// other params that are not an object are the error.
func (tc *ToolCall) read(params json.RawMessage) error {
	if i := jsonx.SkipSpace(params, 0); i >= len(params) || params[i] != '{' {
		_, err := wire.ParamsObject(params) // nil for absent or null params
		return err
	}
	var name json.RawMessage
	_, err := jsonx.EachMember(params, func(m jsonx.Member) bool {
		switch {
		case m.Is(params, "name"):
			name = params[m.ValueStart:m.ValueEnd]
		case m.Is(params, "task"):
			tc.TaskMeta, tc.Augmented = params[m.ValueStart:m.ValueEnd], true
		}
		return true
	})
	if err != nil {
		_, err = wire.ParamsObject(params) // encoding/json's own words
		return err
	}
	tc.Name = jsonx.Unquote(name)
	return nil
}

// CheckToolCall reads x's tools/call and refuses, as 2025-11-25 has it, a
// task-augmented call of a tool forbidden as a task and a plain call of one
// that requires a task; ok is false when x has been answered. With learn,
// the call first learns what the upstream declares of its tool (a
// 2025-11-25 upstream's tools/list), which decides both.
func CheckToolCall(x *wire.Exchange, learn bool) (tc ToolCall, ok bool) {
	if err := tc.read(x.Msg.Params); err != nil {
		x.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err))
		return tc, false
	}
	if tc.Augmented && string(tc.TaskMeta) == "null" {
		tc.Augmented = false
	}
	if tc.Augmented && x.Runtime.Drain.Draining() {
		// Refused before anything is asked of the upstream for it: a
		// stopping process makes no new task (CheckQuota says the same).
		x.Fail(x.Draining())
		return tc, false
	}
	if learn { // decided on what the upstream declares of the tool
		x.Tools.LearnToolsFor(x.R.Context(), x.R, x.Next, tc.Name, tc.Augmented)
	}
	switch mode := x.Tools.EffectiveMode(tc.Name); {
	case tc.Augmented && mode == task.SupportForbidden:
		x.Fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tool %q does not support task-augmented execution (taskSupport is forbidden)", tc.Name))
		return tc, false
	case !tc.Augmented && mode == task.SupportRequired:
		x.Fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Tool %q requires task augmentation: send params.task (taskSupport is required)", tc.Name))
		return tc, false
	}
	return tc, true
}

// ServeCancelled routes a client's notifications/cancelled. Plain calls
// pass through with the client's own id, which is the id the upstream
// knows, so their cancellation passes through untouched, as a plain proxy
// would pass it. The ids the gateway made up for its own calls are not the
// client's to cancel (tasks are cancelled with tasks/cancel only).
func ServeCancelled(x *wire.Exchange) error {
	c := &call{x}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(c.Msg.Params, &p)
	if jsonrpc.IsGatewayID(p.RequestID) {
		c.W.WriteHeader(http.StatusAccepted)
		return nil
	}
	return c.Pass()
}

// AdmitTask admits the task a task-augmented call of x asks for, as this
// package does, also for a 2025-11-25 task another package makes (the
// reverse version bridge's): the ttl of params.task (taskMeta) within the
// configuration's limits, then the caller's rate and quota. ok is false
// when x has been answered with the refusal.
func AdmitTask(x *wire.Exchange, taskMeta json.RawMessage) (ttl time.Duration, ok bool) {
	ttl, err := (&call{x}).requestedTTL(taskMeta)
	if err != nil {
		x.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%v", err))
		return 0, false
	}
	if x.Limited() { // creating a task is the most expensive operation
		return 0, false
	}
	if e := x.CheckQuota(); e != nil {
		x.Fail(e)
		return 0, false
	}
	return ttl, true
}

// minTaskTTL is the shortest ttl a task is granted: a shorter request
// (but above zero) is raised to it.
const minTaskTTL = time.Second

// requestedTTL reads params.task.ttl (milliseconds) and applies the limits.
// The ttl is an integer as JSON Schema reads one: 60000, 60000.0 and 6e4
// are the same ttl, 1500.5 is refused. It is clamped while still an int64
// (converted first, a huge ttl such as 1e13 overflows time.Duration into a
// negative one), and one beyond int64's range is taken as the longest
// allowed: the receiver decides the ttl it grants. A ttl that is not
// positive is refused; absent or null asks for the default.
func (c *call) requestedTTL(taskMeta json.RawMessage) (time.Duration, error) {
	raw, ok := plainTTLParam(taskMeta)
	if !ok {
		var meta struct {
			TTL json.RawMessage `json:"ttl"`
		}
		if err := json.Unmarshal(taskMeta, &meta); err != nil {
			return 0, errors.New("params.task must be an object")
		}
		if string(meta.TTL) != "null" {
			raw = meta.TTL
		}
	}
	if raw == nil {
		return c.DefaultTTL, nil
	}
	ms, err := jsonx.Int(raw)
	switch sign := jsonx.IntRangeSign(err); {
	case sign > 0:
		return c.MaxTTL, nil
	case errors.Is(err, jsonx.ErrNotIntegral):
		return 0, errors.New("params.task.ttl must be an integer number of milliseconds")
	case sign < 0 || err != nil || ms <= 0:
		return 0, errors.New("params.task.ttl must be a positive number of milliseconds")
	}
	maxMs := c.MaxTTL.Milliseconds()
	minMs := min(minTaskTTL, c.MaxTTL).Milliseconds()
	return min(time.Duration(max(min(ms, maxMs), minMs))*time.Millisecond, c.MaxTTL), nil
}

func (c *call) createTask(tool string, taskMeta json.RawMessage) error {
	ttl, ok := AdmitTask(c.Exchange, taskMeta)
	if !ok {
		return nil
	}
	params, err := jsonx.Delete(c.Msg.Params, "task")
	if err != nil {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params: %v", err))
		return nil
	}
	t := c.NewTask(task.Era2025, tool, params, ttl)
	if !c.StoreTask(t, func(t *task.Task) any { return CreateResult(t) }, c.Fail) {
		return nil
	}
	c.StartTask(t)
	c.ReplyRaw(CreateResult(t))
	return nil
}

// CreateResult is the 2025-11-25 CreateTaskResult, encoded.
func CreateResult(t *task.Task) json.RawMessage {
	b := append(make([]byte, 0, 256), `{"task":`...)
	b = AppendTask(b, t)
	return append(b, '}')
}

func (c *call) serveGet() error {
	if c.ServeCachedGet(runtime.WireV2025) {
		return nil
	}
	id, e := c.TaskIDParam()
	if e != nil {
		c.Fail(e)
		return nil
	}
	t, err := c.Runtime.Store.Get(c.R.Context(), c.Owner, id)
	if err != nil {
		c.Fail(c.LookupFailure(id, err))
		return nil
	}
	c.Route.Audit(runtime.AuditRetrieved, id, t, c.Caller)
	return c.ReplyView(t, runtime.WireV2025)
}

func (c *call) serveList() error {
	if !c.ListTasks {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "tasks/list is not offered: callers are not authenticated, so tasks cannot be listed per caller"))
		return nil
	}
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if err := json.Unmarshal(jsonx.OrEmptyObject(c.Msg.Params), &p); err != nil {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "params: %v", err))
		return nil
	}
	cursor := ""
	if p.Cursor != nil {
		cursor = *p.Cursor
	}
	tasks, next, err := c.Runtime.Store.List(c.R.Context(), c.Owner, cursor, listPageSize)
	if errors.Is(err, task.ErrInvalidCursor) {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid cursor"))
		return nil
	}
	if err != nil {
		c.Fail(c.StoreFailure(err))
		return nil
	}
	out := struct {
		Tasks      []Task `json:"tasks"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{Tasks: make([]Task, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, Render(t))
	}
	return c.Reply(out)
}

const listPageSize = 50

func (c *call) serveCancel() error {
	id, e := c.TaskIDParam()
	if e != nil {
		c.Fail(e)
		return nil
	}
	t, err := c.Route.CancelTask(c.R.Context(), c.Owner, id, c.Next)
	if errors.Is(err, task.ErrTerminal) {
		cur, gerr := c.Runtime.Store.Get(c.R.Context(), c.Owner, id)
		if gerr != nil {
			c.Fail(c.LookupFailure(id, gerr))
			return nil
		}
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Cannot cancel task: already in terminal status '%s'", cur.Status))
		return nil
	}
	if err != nil {
		c.Fail(c.LookupFailure(id, err))
		return nil
	}
	return c.Reply(Render(t))
}
