package taskproxy

import (
	"net/http"
	"sync"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Long-lived answers (a blocking tasks/result, a subscriptions/listen
// stream) each hold a connection and a goroutine until the task ends or the
// client leaves. Each owner may hold only so many at once, so that one
// caller cannot pin the server's connections.

// maxStreamsPerOwner caps the long-lived answers one owner holds open.
const maxStreamsPerOwner = 16

// streamTable counts the open long-lived answers per owner.
type streamTable struct {
	mu sync.Mutex
	n  map[string]int
}

func newStreamTable() *streamTable { return &streamTable{n: map[string]int{}} }

// acquire takes a slot of key, or reports false when key holds the maximum.
func (s *streamTable) acquire(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key] >= maxStreamsPerOwner {
		return false
	}
	s.n[key]++
	return true
}

func (s *streamTable) release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key]--; s.n[key] <= 0 {
		delete(s.n, key)
	}
}

// openStream takes one of the caller's stream slots and returns its
// release, or answers HTTP 429 with a JSON-RPC error naming the limit and
// returns nil. Anonymous callers are counted per client address (the one
// the glue determined, as for the rate limit).
func (c *call) openStream() (release func()) {
	key := c.owner
	if key == Anonymous {
		// The client address the glue determined, as the rate limiter
		// keys them: behind a trusted proxy the connection's address is
		// the proxy's, and every anonymous client would share one budget.
		key = "ip:" + peerOf(c.r).ClientIP
	}
	if !c.g.rt.streams.acquire(key) {
		if o := c.g.cfg.Observer; o != nil {
			o.Refused("streams")
		}
		c.w.Header().Set("Retry-After", "1")
		writeJSONError(c.w, http.StatusTooManyRequests, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeRateLimited,
			"too many open streams for this principal (limit %d); close one first", maxStreamsPerOwner))
		return nil
	}
	return func() { c.g.rt.streams.release(key) }
}
