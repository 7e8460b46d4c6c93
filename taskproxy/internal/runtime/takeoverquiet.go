package runtime

import (
	"sync/atomic"
	"time"
)

// takeoverQuiet holds back takeovers after this process saw the shared
// store fail. A lease expires when its replica cannot renew it, and a
// store outage stops every replica renewing: once the store is back, a
// lease that expired during the outage says nothing about its replica,
// which renews it within a third of it. So for a lease's length after the
// last failure this process saw (a takeover pass that could not list, a
// renewal of its own leases that failed) it takes nothing over. The
// failures of renewals count too: a takeover pass may fall entirely
// outside a short outage that the renewals met.
type takeoverQuiet struct {
	// until is the end of the quiet period, in Unix nanoseconds.
	until atomic.Int64
}

// troubled records a store failure seen at now: the quiet period lasts
// until a lease's length (ttl) after it (it is only ever extended).
func (q *takeoverQuiet) troubled(now time.Time, ttl time.Duration) {
	end := now.Add(ttl).UnixNano()
	for {
		cur := q.until.Load()
		if cur >= end || q.until.CompareAndSwap(cur, end) {
			return
		}
	}
}

// quiet reports whether takeovers wait at now.
func (q *takeoverQuiet) quiet(now time.Time) bool { return now.UnixNano() < q.until.Load() }
