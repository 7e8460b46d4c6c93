package v2026

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Calls to a 2026-07-28 upstream that runs tasks itself (the tasks
// extension in its server/discover, [call.upstreamRunsTasks]):
//
//   - a client that declares the extension: the call goes upstream with the
//     extension kept; an upstream CreateTaskResult becomes the gateway's
//     task (its own id, bound to the caller) that follows the upstream's
//     (its runtime worker follows it); a plain answer passes through, and a
//     call still running at task_after becomes a gateway task as for any
//     upstream, which takes a later CreateTaskResult the same way;
//   - a client that does not: the call goes upstream without it, as
//     always; when the upstream refuses it for want of the extension
//     (-32021: the tool runs only as a task), the gateway calls again
//     declaring it and answers the client's call with the task's outcome.
//
// Tools configured forbidden keep their plain call, and a tool configured
// required still needs the client to declare the extension.

// plainOnTaskRuntime reports whether a call of a client without the
// extension, of a tool in mode, is served by servePlainOnTaskRuntime:
// the upstream runs tasks itself, and the tool is neither forbidden nor
// configured required (which the gateway refuses without the extension).
func (c *call) plainOnTaskRuntime(mode task.Support) bool {
	return mode == task.SupportOptional && c.upstreamRunsTasks()
}

// runOnTaskRuntime serves a call, checked and within quota, of a
// client that declares the extension, to an upstream that runs tasks
// itself.
func (c *call) runOnTaskRuntime(name string, mode task.Support) error {
	if key, _ := gate.IdempotencyOf(c.R, c.Msg.Params); key != "" {
		// A task at once, before the upstream is called (a repeat finds
		// it); its worker takes the upstream's CreateTaskResult.
		t := c.NewTask(task.Era2026, name, c.Msg.Params, c.DefaultTTL)
		t.UpstreamTask, t.UpstreamV2026 = true, true
		if c.StoreTask(t, func(t *task.Task) any { return CreateResult(t) }, c.fail) {
			c.StartTask(t)
			return c.Reply(CreateResult(t))
		}
		return nil
	}
	return c.runCall(name, mode, true)
}

// passAnswer answers the client with the upstream's own answer to a
// call that did not become a task.
func (c *call) passAnswer(run *runtime.Run, stopFollowingClient func() bool, reply *Reply, ev upstream.Event) error {
	stopFollowingClient()
	defer run.Release()
	c.sendAnswer(reply, ev)
	return nil
}

// sendAnswer answers the client with ev, the last event of an upstream
// call: the upstream's answer as a plain proxy gives it, or 502 when
// there was none.
func (c *call) sendAnswer(reply *Reply, ev upstream.Event) {
	if ev.Err != nil {
		reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, rpcerr.UpstreamFailure(c.Log, ev.Err)), http.StatusBadGateway)
		return
	}
	status := http.StatusOK
	if ev.Final.Error != nil {
		status = Status(ev.Final.Error.Code)
	}
	data, _ := json.Marshal(jsonrpc.Message{JSONRPC: "2.0", ID: c.Msg.ID, Result: ev.Final.Result, Error: ev.Final.Error})
	reply.SendUpstream(data, status, ev.Head)
}

// adoptUpstreamTask makes the gateway's task of an upstream task just
// created: stored with the upstream's task id, then answered, and followed
// by a worker. When the gateway cannot take it (the client left, the store
// refused), the upstream's task is cancelled: it must not run untracked.
func (c *call) adoptUpstreamTask(t *task.Task, run *runtime.Run, stopFollowingClient func() bool, reply *Reply, created follow.V2026Created) error {
	if !stopFollowingClient() {
		follow.CancelV2026UpstreamTask(run.Ctx, run.Base, run.Next, t.Params, created.TaskID)
		run.Release()
		return nil
	}
	t.UpstreamTask, t.UpstreamV2026, t.UpstreamTaskID = true, true, created.TaskID
	if created.StatusMessage != "" && created.Status == task.StatusWorking {
		t.StatusMessage = follow.UpstreamStatusMessage(created.StatusMessage)
	}
	if err := c.CreateWithinLimits(t); err != nil {
		follow.CancelV2026UpstreamTask(run.Ctx, run.Base, run.Next, t.Params, created.TaskID)
		run.Cancel(err)
		run.Release()
		c.refuseCreate(reply, t, err)
		return nil
	}
	c.Route.AuditTask(runtime.AuditCreated, t)
	c.Route.StartWorker(t, run, nil, nil)
	c.replyCreated(reply, t)
	return nil
}

// servePlainOnTaskRuntime serves a client without the extension: its
// call as it is, and, when the upstream refuses it for want of the
// extension, again with it declared, waiting for the upstream's task.
func (c *call) servePlainOnTaskRuntime() error {
	params, err := withoutTasksExtension(c.Msg.Params)
	if err != nil {
		return c.Pass()
	}
	ctx := c.R.Context()
	base := c.Detach(c.R)
	reply := NewReply(c.Exchange)
	ev := c.plainAttempt(ctx, base, params, reply, 1)
	if ev.Err == nil && ev.Final.Error != nil && ev.Final.Error.Code == jsonrpc.CodeMissingRequiredClientCapability {
		withExt, err := withTasksExtension(params)
		if err != nil {
			c.fail(rpcerr.InternalError(c.Log, "declaring the tasks extension", err))
			return nil
		}
		// The upstream's task runs for the caller as a task of the
		// gateway's would: the same rate limit and bound on active tasks.
		if c.Limited() {
			return nil
		}
		release, e := c.AdmitInline()
		if e != nil {
			c.fail(e)
			return nil
		}
		var left bool
		if ev, left = c.plainTaskAttempt(ctx, base, withExt, reply, release); left {
			return nil // the client left; the slot is given back in the background
		}
		if ev.Err == nil && ev.Final.Error == nil {
			if created, ok := follow.ReadV2026Created(ev.Final.Result); ok {
				name, _ := wire.StringParam(c.Msg.Params, "name")
				rec := follow.PlainTaskRecord(c.Caller, name, created.TaskID)
				c.Route.AuditTask(follow.AuditPlainCreated, rec)
				return c.awaitInline(reply, &inlineWait{owner: c.UpstreamOwner(), tool: name, upstreamTaskID: created.TaskID, rec: rec, audit: c.Route.AuditTask,
					pollMs: created.PollIntervalMs, pollErr: created.PollIntervalErr, params: withExt, base: base, next: c.Next, release: release,
					runLeft: c.RunTimeoutOf(name), runLimit: c.RunTimeoutOf(name)})
			}
		}
		release()
	}
	if ctx.Err() == nil {
		c.sendAnswer(reply, ev)
	}
	return nil
}

// plainAttempt makes one upstream call of a plain client's tools/call with
// params, relaying its progress, and returns its last event.
func (c *call) plainAttempt(ctx context.Context, base *http.Request, params json.RawMessage, reply *Reply, n int) upstream.Event {
	id, _ := json.Marshal(jsonrpc.GatewayIDPrefix + "plain:" + task.NewTaskID() + ":" + strconv.Itoa(n))
	body, err := jsonrpc.RequestBytes(id, "tools/call", params)
	if err != nil {
		return upstream.Event{Err: err}
	}
	ev, _ := upstream.StartAttempt(ctx, base, c.Next, id, body).Until(ctx, nil, relayTo(reply))
	return ev
}

// plainTaskAttempt makes the call declaring the extension for a plain
// client's tools/call and returns its last event; it runs detached from
// the client's request (follow.PlainV2026TaskCall): when the client
// leaves first (left), the task it makes is cancelled and release called
// in the background.
func (c *call) plainTaskAttempt(ctx context.Context, base *http.Request, params json.RawMessage, reply *Reply, release func()) (ev upstream.Event, left bool) {
	id, _ := json.Marshal(jsonrpc.GatewayIDPrefix + "plain:" + task.NewTaskID() + ":2")
	body, err := jsonrpc.RequestBytes(id, "tools/call", params)
	if err != nil {
		return upstream.Event{Err: err}, false
	}
	return follow.PlainV2026TaskCall(ctx, c.Log, base, c.Next, id, params, body, relayTo(reply), release)
}

// withTasksExtension declares the tasks extension in the client
// capabilities of params._meta.
func withTasksExtension(params json.RawMessage) (json.RawMessage, error) {
	return jsonx.SetPath(jsonx.OrEmptyObject(params), []string{"_meta", wire.MetaClientCapabilities, "extensions", wire.ExtensionTasks}, []byte("{}"))
}
