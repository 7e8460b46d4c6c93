package task

import (
	"context"
	"time"
)

// LearnedStore keeps what a gateway learned of an upstream (what its
// initialize answer declared), so that every replica and the next process
// know it without having seen that answer themselves. A value lives for
// its ttl, then counts as never stored: what an upstream declares may
// change with its version. Implementations must be safe for concurrent
// use.
type LearnedStore interface {
	// SaveLearned stores value under key for ttl, replacing what was
	// stored there before.
	SaveLearned(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// LoadLearned returns the value stored under key, or ErrNotFound when
	// there is none or its ttl has passed.
	LoadLearned(ctx context.Context, key string) ([]byte, error)
}
