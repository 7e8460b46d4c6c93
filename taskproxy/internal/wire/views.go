package wire

import (
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The tasks/get answers of finished tasks come from the runtime's view
// cache ([runtime.Runtime.CachedView]) when they can; this file renders
// them for each protocol version and writes them.

// ServeCachedGet answers a tasks/get of a finished task from the cache, and
// reports whether it did. It reads params.taskId itself, and looks the
// id up without making a string of it; an id written with escapes is left
// to the caller, which reads it with TaskIDParam (a cache miss: the store
// answers).
func (c *Exchange) ServeCachedGet(wire runtime.Wire) bool {
	params := c.Msg.Params
	if len(params) == 0 || !c.validParams(params) && !jsonx.Valid(params) {
		return false
	}
	id, ok := plainStringMember(params, "taskId")
	if !ok {
		return false
	}
	view, hit, ok := c.Runtime.CachedView(c.Owner, id, wire, runtime.Now())
	if !ok {
		return false
	}
	// A read this route audited already goes to debug level: with debug
	// off there is nothing to write, nor to look up.
	if core := c.AuditLog.Core(); core.Enabled(zap.InfoLevel) && (!hit.Audited(c.Route) || core.Enabled(zap.DebugLevel)) {
		var stub task.Task // the audit's only: on the stack
		hit.Stub(&stub)
		c.Route.Audit(runtime.AuditRetrieved, stub.ID, &stub, c.Caller)
		hit.Mark(c.Route)
	}
	c.ReplyRaw(view)
	return true
}

// ReplyView answers a tasks/get with the view of t read from the store,
// caching it when t is finished.
func (c *Exchange) ReplyView(t *task.Task, wire runtime.Wire) error {
	view, err := c.Runtime.View(t, wire, runtime.Now())
	if err != nil {
		c.Fail(rpcerr.InternalError(c.Log, "encoding a result", err))
		return nil
	}
	c.ReplyRaw(view)
	return nil
}
