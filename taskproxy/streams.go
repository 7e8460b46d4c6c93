package taskproxy

import (
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// openStream takes one of the caller's stream slots and returns its
// release, or answers HTTP 429 with a JSON-RPC error naming the limit and
// returns nil. task.Anonymous callers are counted per client address (the one
// the glue determined, as for the rate limit).
func (c *call) openStream() (release func()) {
	key := c.owner
	if key == task.Anonymous {
		// The client address the glue determined, as the rate limiter
		// keys them: behind a trusted proxy the connection's address is
		// the proxy's, and every anonymous client would share one budget.
		key = "ip:" + peerOf(c.r).ClientIP
	}
	if !c.g.rt.streams.Acquire(key) {
		if o := c.g.cfg.Observer; o != nil {
			o.Refused("streams")
		}
		c.w.Header().Set("Retry-After", "1")
		writeJSONError(c.w, http.StatusTooManyRequests, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeRateLimited,
			"too many open streams for this principal (limit %d); close one first", gate.MaxStreamsPerOwner))
		return nil
	}
	return func() { c.g.rt.streams.Release(key) }
}
