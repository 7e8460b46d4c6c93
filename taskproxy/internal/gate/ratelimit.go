package gate

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimiter caps task operations per owner with a token bucket each. A
// bucket that has filled up again is dropped: a new one would be the same.
// So the map holds only the callers of the last few seconds, and never more
// than MaxBuckets of them: anonymous callers are told apart by address, and
// a caller with many addresses must not grow it without limit.
type RateLimiter struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	calls   int
	swept   time.Time // when dropFull last ran
}

// MaxBuckets bounds the callers the limiter tracks at once; past it, a new
// caller is refused until buckets fill up again and are dropped.
const MaxBuckets = 1 << 16

// NewRateLimiter allows perSecond operations per owner with bursts of twice
// that; perSecond <= 0 disables the limit.
func NewRateLimiter(perSecond float64) *RateLimiter {
	if perSecond <= 0 {
		return nil
	}
	return &RateLimiter{limit: rate.Limit(perSecond), burst: max(1, int(math.Ceil(2*perSecond))), buckets: map[string]*rate.Limiter{}}
}

// Allow takes one token of owner's bucket, or says how long to wait.
func (l *RateLimiter) Allow(owner string, now time.Time) (bool, time.Duration) {
	if l == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	b, ok := l.buckets[owner]
	// A sweep now and then, and when the map is full, at most ten times a
	// second: a caller with many addresses must not make each request scan
	// the whole map.
	if l.calls%1024 == 0 || (!ok && len(l.buckets) >= MaxBuckets && now.Sub(l.swept) >= 100*time.Millisecond) {
		l.dropFull(now)
		l.swept = now
	}
	if !ok {
		if len(l.buckets) >= MaxBuckets {
			return false, time.Second
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[owner] = b
	}
	r := b.ReserveN(now, 1)
	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return false, delay
	}
	return true, 0
}

// dropFull drops the buckets that have filled up again by now: they hold
// nothing a new bucket would not.
func (l *RateLimiter) dropFull(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
}
