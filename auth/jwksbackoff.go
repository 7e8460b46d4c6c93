package auth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// refreshBackoff spaces the JWKS fetches that tokens with an unknown "kid"
// trigger. Healthy, it allows one fetch per min, so keys published after an
// outage or a rotation are picked up within seconds. Each failed fetch
// doubles the spacing up to max, so a JWKS endpoint that is down is not
// hammered; a token verified with a fetched key brings it back to min.
type refreshBackoff struct {
	limiter  *rate.Limiter // handed to jwkset as its unknown-kid limiter
	min, max time.Duration
	url      string
	logger   *zap.Logger

	mu  sync.Mutex
	cur time.Duration
	// stretched is cur != min, read without the lock on every token.
	stretched atomic.Bool
}

func newRefreshBackoff(min, max time.Duration, url string, logger *zap.Logger) *refreshBackoff {
	if max < min {
		max = min
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &refreshBackoff{limiter: rate.NewLimiter(rate.Every(min), 1), min: min, max: max, cur: min, url: url, logger: logger}
}

// failed records a failed fetch (at start, periodic or on an unknown kid),
// stretches the spacing and logs the failure at warn level: tokens signed
// with keys not yet fetched are refused until a fetch succeeds.
func (b *refreshBackoff) failed(_ context.Context, err error) {
	b.mu.Lock()
	b.cur = min(b.cur*2, b.max)
	next := b.cur
	b.limiter.SetLimit(rate.Every(next))
	b.stretched.Store(next != b.min)
	b.mu.Unlock()
	b.logger.Warn("auth: JWKS fetch failed; tokens signed with keys not yet fetched are refused",
		zap.String("url", b.url), zap.Error(err), zap.Duration("next_fetch_after", next))
}

// succeeded records that fetched keys verify tokens again.
func (b *refreshBackoff) succeeded() {
	if !b.stretched.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = b.min
	b.limiter.SetLimit(rate.Every(b.min))
	b.stretched.Store(false)
}
