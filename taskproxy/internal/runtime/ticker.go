package runtime

import (
	"context"
	"time"
)

// The runtime's maintenance loops (lease renewal, sweeping, settling and
// orphans, takeover) each are a small type with a round, paced by one
// ticker. The loops add no jitter: a round's work is a few store calls,
// and the store elects one replica where only one must act (the
// sweeper's leadership, the lease's compare-and-set).

// ticker paces a maintenance loop: a round every interval, read again
// before each wait (the route in charge, whose configuration sets it,
// may change), and a round at once whenever wake receives (nil: never).
type ticker struct {
	interval func() time.Duration
	wake     <-chan struct{}
}

// every is a ticker of a fixed interval.
func every(d time.Duration) ticker {
	return ticker{interval: func() time.Duration { return d }}
}

// run calls round with the time of each tick until ctx ends. Rounds start
// an interval apart: the next wait begins as a round begins, so a round
// that takes longer than the interval is followed by the next at once.
func (tk ticker) run(ctx context.Context, round func(now time.Time)) {
	timer := time.NewTimer(tk.interval())
	defer timer.Stop()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case now = <-timer.C:
		case <-tk.wake:
			now = time.Now()
		}
		timer.Reset(tk.interval())
		round(now)
	}
}
