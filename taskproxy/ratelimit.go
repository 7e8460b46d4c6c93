package taskproxy

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// limited answers 429 with Retry-After when the caller is over its rate.
// task.Anonymous callers are one principal, so they are told apart by client
// address (the one the glue determined, which behind a trusted proxy is not
// the proxy's): otherwise every client of an unauthenticated gateway shares
// one bucket.
func (c *call) limited() bool {
	key := c.owner
	if key == task.Anonymous {
		key = "ip:" + peerOf(c.r).ClientIP
	}
	ok, wait := c.g.limiter.Allow(key, clock())
	if ok {
		return false
	}
	if c.g.cfg.Observer != nil {
		c.g.cfg.Observer.Refused("rate_limit")
	}
	c.w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	writeJSONError(c.w, http.StatusTooManyRequests, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeRateLimited, "rate limit exceeded: too many task operations; retry after %s", wait.Round(time.Millisecond)))
	return true
}
