package taskproxy

import (
	"encoding/json"
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
	"go.uber.org/zap"
)

// The tasks/get answers of finished tasks come from the runtime's view
// cache (internal/runtime/viewcache.go) when they can; this file renders
// them for each protocol version and writes them.

// renderView encodes the tasks/get result of t on wire.
func renderView(t *task.Task, wire runtime.Wire) ([]byte, error) {
	if wire == runtime.WireV2026 {
		return json.Marshal(toV2026Detail(t, "complete"))
	}
	return toV2025Task(t).appendJSON(nil), nil
}

// serveCachedGet answers a tasks/get of a finished task from the cache, and
// reports whether it did.
func (c *call) serveCachedGet(id string, wire runtime.Wire) bool {
	stub, view, ok := c.g.rt.CachedView(c.owner, id, wire, clock())
	if !ok {
		return false
	}
	if c.g.auditLog.Core().Enabled(zap.InfoLevel) {
		c.g.route.Audit(runtime.AuditRetrieved, id, stub, c.caller)
	}
	c.replyRaw(view)
	return true
}

// replyView answers a tasks/get with the view of t read from the store,
// caching it when t is finished.
func (c *call) replyView(t *task.Task, wire runtime.Wire) error {
	view, err := renderView(t, wire)
	if err != nil {
		c.fail(runtime.InternalError(c.g.log, "encoding a result", err))
		return nil
	}
	c.g.rt.CacheView(t, wire, view, clock())
	c.replyRaw(view)
	return nil
}

// replyRaw writes a JSON-RPC success response around result, already
// encoded, without encoding it again.
func (c *call) replyRaw(result []byte) {
	writeJSON(c.w, http.StatusOK, jsonrpc.ResponseRaw(c.msg.ID, result))
}
