package wire

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// DNS rebinding protection for what the gateway answers itself. The spec has
// servers validate Origin and Host; for requests that pass through, the
// upstream does, but tasks and their results never reach it. The rule is the
// usual one for local servers: a request that arrived on a loopback address
// must name a loopback host, in Host and in Origin when it has one.
//
// A rebinding attack borrows a browser on the gateway's machine, which holds
// no credentials of the gateway's: an authenticated caller, or a request a
// trusted front proxy forwarded (which names the public host by design), is
// not what the rule protects against, so RebindingAuto skips it there.

// Rebinding says when the DNS rebinding guard applies.
type Rebinding int

// The guard modes (the root's RebindingProtection names them).
const (
	// RebindingAuto guards anonymous requests on a loopback listener that
	// did not come through a trusted proxy. It is the default.
	RebindingAuto Rebinding = iota
	// RebindingOn guards every request on a loopback listener.
	RebindingOn
	// RebindingOff never guards.
	RebindingOff
)

// guarded reports whether the rebinding guard applies to the call.
func (c *Exchange) guarded() bool {
	switch c.Rebinding {
	case RebindingOff:
		return false
	case RebindingOn:
		return true
	}
	return c.Owner == task.Anonymous && !c.PeerOf(c.R).ViaTrustedProxy
}

// GuardOrigin answers 403 and returns false for a rebinding suspect, and
// 415 for a post a web page could have sent cross-site (gate.CrossSiteSimple),
// whoever the caller.
func (c *Exchange) GuardOrigin() bool {
	if gate.CrossSiteSimple(c.R) {
		WriteError(c.W, http.StatusUnsupportedMediaType, c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json"))
		return false
	}
	// The cheaper test first: most requests are no suspects, and whether
	// the guard applies asks the server who the peer is.
	if !gate.RebindingSuspect(c.R) || !c.guarded() {
		return true
	}
	c.RebindingRefusals.refused(c.Log, c.R)
	WriteError(c.W, http.StatusForbidden, c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Forbidden: the Host or Origin header names a host this local server does not serve"))
	return false
}

// RebindingNote logs the guard's refusals: the first one of a
// configuration as a warning that says what to change when the refused
// request came from the operator's own front proxy (the usual cause on a
// first day: it forwards the public Host to a loopback listener), the
// others at debug level, since a refusal is otherwise a client's business.
type RebindingNote struct{ warned atomic.Bool }

func (n *RebindingNote) refused(log *zap.Logger, r *http.Request) {
	fields := []zap.Field{zap.String("host", r.Host), zap.String("origin", r.Header.Get("Origin")), zap.String("remote", r.RemoteAddr)}
	if n.warned.CompareAndSwap(false, true) {
		log.Warn("refused with HTTP 403 a request on a loopback listener that names another host (DNS rebinding protection); "+
			"if a front proxy on this host forwards its public Host, add the proxy to the trusted_proxies server option "+
			"or authenticate callers (auth jwt, principal), see dns_rebinding_protection; later refusals are logged at debug level", fields...)
		return
	}
	log.Debug("refused with HTTP 403 a request on a loopback listener that names another host (DNS rebinding protection)", fields...)
}

// Limited answers 429 with Retry-After when the caller is over its rate:
// task operations and initialize count against it.
// task.Anonymous callers are one principal, so they are told apart by client
// address (the one the glue determined, which behind a trusted proxy is not
// the proxy's): otherwise every client of an unauthenticated gateway shares
// one bucket.
func (c *Exchange) Limited() bool {
	if c.Limiter == nil { // no rate limit: no caller key to make
		return false
	}
	ok, wait := c.Limiter.Allow(c.CallerKey(), time.Now())
	if ok {
		return false
	}
	if c.Observer != nil {
		c.Observer.Refused("rate_limit")
	}
	c.W.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	WriteError(c.W, http.StatusTooManyRequests, c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeRateLimited, "rate limit exceeded: too many task operations and sessions; retry after %s", wait.Round(time.Millisecond)))
	return true
}

// OpenStream takes one of the caller's stream slots and returns its
// release, or answers HTTP 429 with a JSON-RPC error naming the limit and
// returns nil. task.Anonymous callers are counted per client address (the one
// the glue determined, as for the rate limit).
func (c *Exchange) OpenStream() (release func()) {
	key, kind := c.CallerKey(), gate.StreamKindOf(c.Msg.Method)
	if !c.Streams.Acquire(key, kind) {
		if o := c.Observer; o != nil {
			o.Refused("streams")
		}
		c.W.Header().Set("Retry-After", "1")
		WriteError(c.W, http.StatusTooManyRequests, c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeRateLimited,
			"too many open streams for this principal (limit %d); close one first", gate.MaxStreamsPerOwner))
		return nil
	}
	return func() { c.Streams.Release(key, kind) }
}

// WatchTasks counts n task ids that a subscription of the caller watches
// against the bound on all the caller's subscriptions, keyed as OpenStream
// keys streams. Over the bound it answers -32602, naming the limit and what
// the caller already watches, and returns nil; else release takes the ids
// back when the subscription ends.
func (c *Exchange) WatchTasks(n int) (release func()) {
	key := c.CallerKey()
	limit := c.MaxWatchedPerOwner
	if limit <= 0 {
		limit = gate.DefaultMaxWatchedPerOwner
	}
	ok, watching := c.Streams.Watch(key, n, limit)
	if !ok {
		if o := c.Observer; o != nil {
			o.Refused("watched_tasks")
		}
		WriteError(c.W, http.StatusBadRequest, c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams,
			"Invalid params: notifications.taskIds: this principal's open subscriptions already watch %d task ids, and %d more would pass the limit of %d per principal across subscriptions; close a subscription or watch fewer tasks",
			watching, n, limit))
		return nil
	}
	return func() { c.Streams.Unwatch(key, n) }
}

// CallerKey is whom a long-lived answer, and a task (its quota,
// task.Task.Quota), counts against: the owner, or for anonymous callers
// the client address the glue determined, as the rate limiter keys them:
// behind a trusted proxy the connection's address is the proxy's, and
// every anonymous client would share one budget.
func (c *Exchange) CallerKey() string {
	if c.Owner == task.Anonymous {
		return AddressKey(c.PeerOf(c.R).ClientIP)
	}
	return c.Owner
}

// AddressKey is the key of an anonymous caller at ip: "ip:" and the
// address, or for IPv6 its /64, since one host is commonly given a whole
// /64 and could take a new address, and so a new budget, for every
// request. An IPv4 address mapped into IPv6 counts as the IPv4 address.
func AddressKey(ip string) string {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "ip:" + ip
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is4() {
		return "ip:" + addr.String()
	}
	return "ip:" + netip.PrefixFrom(addr, 64).Masked().String()
}

// PeerOf returns the peer of r: the one the glue reports (Policy.Peer),
// else the one r's context carries, or else r.RemoteAddr.
func (p Policy) PeerOf(r *http.Request) task.Peer {
	if p.Peer != nil {
		if peer, ok := p.Peer(r); ok {
			return peer
		}
	}
	return PeerOf(r)
}

// PeerOf returns the peer r's context carries (task.WithPeer), or else
// r.RemoteAddr.
func PeerOf(r *http.Request) task.Peer {
	if p, ok := task.PeerOf(r.Context()); ok {
		return p
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return task.Peer{ClientIP: host}
}
