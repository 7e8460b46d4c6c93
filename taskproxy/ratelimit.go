package taskproxy

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// rateLimiter caps task operations per owner with a token bucket each.
// Buckets idle for a while are dropped, so the map stays as small as the set
// of active callers.
type rateLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	calls   int
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const bucketIdle = 5 * time.Minute

// newRateLimiter allows perSecond operations per owner with bursts of twice
// that; perSecond <= 0 disables the limit.
func newRateLimiter(perSecond float64) *rateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &rateLimiter{limit: rate.Limit(perSecond), burst: max(1, int(math.Ceil(2*perSecond))), buckets: map[string]*bucket{}}
}

// allow takes one token of owner's bucket, or says how long to wait.
func (l *rateLimiter) allow(owner string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.calls%1024 == 0 {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > bucketIdle {
				delete(l.buckets, k)
			}
		}
	}
	b, ok := l.buckets[owner]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[owner] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return false, delay
	}
	return true, 0
}

// limited answers 429 with Retry-After when the caller is over its rate.
// Anonymous callers are one principal, so they are told apart by client
// address (the one the glue determined, which behind a trusted proxy is not
// the proxy's): otherwise every client of an unauthenticated gateway shares
// one bucket.
func (c *call) limited() bool {
	key := c.owner
	if key == Anonymous {
		key = "ip:" + peerOf(c.r).ClientIP
	}
	ok, wait := c.g.limiter.allow(key, clock())
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
