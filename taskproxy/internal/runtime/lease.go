package runtime

import (
	"sync/atomic"
	"time"
)

// Lease timing. A worker holds its task's lease for the lease ttl and
// renews it every third of that; the takeover pass runs as often. So a
// replica that dies leaves its tasks for at most the ttl plus one pass
// before another replica takes them over: a short lease makes takeover
// fast, at the cost of a store write per running task every third of it,
// and of tasks taken over from a replica that was only slow (a store that
// answered late for longer than the ttl), whose call then ends unknown or
// runs twice (retry_on_restart).
const (
	// MinLeaseTTL and MaxLeaseTTL bound a configured lease ttl: under 2 s
	// a renewal (one store write) and the scheduling of a busy process
	// come close to the lease itself; over 10 minutes a dead replica's
	// tasks stay working for longer than clients wait.
	MinLeaseTTL = 2 * time.Second
	MaxLeaseTTL = 10 * time.Minute
)

// LeaseRenewOf is how often a lease of ttl is renewed, and the takeover
// pass runs: a third of it, so that two renewals may fail before it lapses.
func LeaseRenewOf(ttl time.Duration) time.Duration { return ttl / 3 }

// Leases answers the lease timing of the route in charge (its
// RouteConfig.LeaseTTL, LeaseTTL when unset): configurations sharing a
// runtime follow the one that started last, as they do for sweeping.
type Leases struct{ routes *routeTable }

// TTL is how long a lease lasts.
func (l Leases) TTL() time.Duration {
	if route := l.routes.inCharge(); route != nil && route.cfg.LeaseTTL > 0 {
		return route.cfg.LeaseTTL
	}
	return LeaseTTL
}

// Renew is how often leases are renewed and dead replicas' tasks looked for.
func (l Leases) Renew() time.Duration { return LeaseRenewOf(l.TTL()) }

// Drain is the runtime's state while its process stops: it takes no new
// tasks and takes none over from other replicas, while the workers it runs
// finish (Close then releases what is left). A reload never drains: the
// runtime outlives the configuration.
type Drain struct{ on atomic.Bool }

// Begin starts draining; it cannot be undone, as the process exits.
func (d *Drain) Begin() { d.on.Store(true) }

// Draining reports whether the process is stopping.
func (d *Drain) Draining() bool { return d.on.Load() }
