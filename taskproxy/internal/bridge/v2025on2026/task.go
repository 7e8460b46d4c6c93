package v2025on2026

import (
	"encoding/json"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Tasks for 2025-11-25 clients of a 2026-07-28-only upstream. The
// initialize answer declares the gateway's 2025-11-25 tasks capability and
// tools/list each tool's task mode (the configured one: 2026-07-28 has no
// per-tool mode on the wire), as for any upstream. A task-augmented
// tools/call becomes the gateway's own 2025-11-25 task (durable, bound to
// the caller, tasks/get, tasks/result, tasks/list, tasks/cancel served from
// the store by the 2025-11-25 adapter) whose worker calls the upstream in
// 2026-07-28 form declaring the tasks extension and follows the task the
// upstream makes of it (the runtime's worker follows it): its status
// message, its input requests (relayed on tasks/result, the answers sent
// on with tasks/update), cancel (tasks/cancel upstream), its outcome, and,
// after a restart, the same upstream task again by its recorded id. An
// upstream that asks for input before making its task (an
// InputRequiredResult, the guard pattern) puts the gateway's task in
// input_required: the requests are relayed on tasks/result as any task's,
// and the answers go back as the call's retry (inputResponses and the
// requestState), round after round, until the upstream makes its task
// (followed as above) or answers plainly, which ends the task with that
// answer.

// serveToolsCall applies the tool's task mode as the 2025-11-25 adapter
// does: a task-augmented call becomes a task, a plain one is sent on.
func (c *call) serveToolsCall() error {
	tc, ok := v2025.CheckToolCall(c.Exchange, false) // a 2026-07-28 upstream declares no per-tool modes
	switch {
	case !ok:
		return nil
	case tc.Augmented:
		return c.createTask(tc.Name, tc.TaskMeta)
	}
	return c.forward()
}

// createTask stores the gateway's task of a task-augmented call, answers
// its CreateTaskResult, and starts its worker on the call in 2026-07-28
// form, the extension declared.
func (c *call) createTask(name string, taskMeta json.RawMessage) error {
	ttl, ok := v2025.AdmitTask(c.Exchange, taskMeta)
	if !ok {
		return nil
	}
	meta, ok := c.requestMeta()
	if !ok {
		return nil
	}
	params, err := translate.V2026Params(c.Msg.Params, meta)
	if err == nil {
		params, err = jsonx.SetPath(params, []string{"_meta", wire.MetaClientCapabilities, "extensions", wire.ExtensionTasks}, []byte("{}"))
	}
	if err != nil {
		c.Fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err))
		return nil
	}
	// The task's exchange is the call as the upstream takes it: its
	// 2026-07-28 headers and params (recorded with the task, so that a
	// restart follows it the same way), no session.
	x := *c.Exchange
	x.R = c.R.Clone(c.R.Context())
	setUpstreamHeaders(x.R, "tools/call", params)
	x.Msg = &jsonrpc.Message{JSONRPC: "2.0", ID: c.Msg.ID, Method: "tools/call", Params: params}
	t := x.NewTask(task.Era2025, name, params, ttl)
	t.UpstreamTask, t.UpstreamV2026 = true, true
	if !x.StoreTask(t, func(t *task.Task) any { return v2025.CreateResult(t) }, c.Fail) {
		return nil
	}
	x.StartTask(t)
	c.ReplyRaw(v2025.CreateResult(t))
	return nil
}
