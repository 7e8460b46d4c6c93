package runtime

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// routeTable holds the routes on a runtime. Caddy provisions a new
// configuration before it cleans up the old one, so a route name can have
// several routes at once: the one that started last serves the name's
// tasks; one only provisioned is found too (its configuration is starting
// and has not heard the start yet). The route in charge, the one that
// started last of all, lends background work its settings and logs.
type routeTable struct {
	// current is the route in charge; nil until one starts.
	current atomic.Pointer[Route]

	mu sync.Mutex
	// byName holds, per name, the route that started last; provisioned
	// the routes built and not yet closed; bases each name's first served
	// request (routeBase).
	byName      map[string]*Route
	provisioned map[*Route]struct{}
	bases       map[string]*routeBase
	// failedStart is the route whose start could not open the store, and
	// openErr why (Runtime.retryStart).
	failedStart *Route
	openErr     error
}

func newRouteTable() *routeTable {
	return &routeTable{byName: map[string]*Route{}, provisioned: map[*Route]struct{}{}, bases: map[string]*routeBase{}}
}

// inCharge returns the route in charge of background work, or nil.
func (rs *routeTable) inCharge() *Route { return rs.current.Load() }

// add records a provisioned route and gives it its name's base. A base
// an earlier configuration's request filled is not handed on: its next
// handler is that configuration's (its reverse_proxy, with the upstreams
// it named, cleaned up when a reload replaced it), so tasks that wait
// from now on wait for a request of this one. A base still waiting is
// shared: whichever configuration serves first fills it.
func (rs *routeTable) add(route *Route) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.provisioned[route] = struct{}{}
	if b, ok := rs.bases[route.cfg.Name]; ok && b.filled() {
		delete(rs.bases, route.cfg.Name)
	}
	route.base = rs.baseLocked(route.cfg.Name)
}

func (rs *routeTable) baseLocked(name string) *routeBase {
	b, ok := rs.bases[name]
	if !ok {
		b = &routeBase{ready: make(chan struct{})}
		rs.bases[name] = b
	}
	return b
}

// base returns the base of a route name.
func (rs *routeTable) base(name string) *routeBase {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.baseLocked(name)
}

// remove forgets a route whose configuration is cleaned up. When it was in
// charge of background work, another started route takes over.
func (rs *routeTable) remove(route *Route) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.provisioned, route)
	if rs.failedStart == route {
		rs.failedStart, rs.openErr = nil, nil
	}
	if rs.byName[route.cfg.Name] == route {
		delete(rs.byName, route.cfg.Name)
	}
	if rs.current.Load() == route {
		var next *Route
		for _, o := range rs.byName {
			next = o
			break
		}
		rs.current.Store(next)
	}
}

// upstreams reports the upstream state of each route that serves a name,
// by name.
func (rs *routeTable) upstreams() []RouteUpstream {
	rs.mu.Lock()
	out := make([]RouteUpstream, 0, len(rs.byName))
	for name, route := range rs.byName {
		if route.cfg.Upstream != nil {
			out = append(out, RouteUpstream{Route: name, StateReport: route.cfg.Upstream.Report()})
		}
	}
	rs.mu.Unlock()
	slices.SortFunc(out, func(a, b RouteUpstream) int { return strings.Compare(a.Route, b.Route) })
	return out
}

// startFailed remembers the route whose start could not open the store,
// and why, so that a health check can retry the start and report the cause
// (nil, nil once a start succeeded).
func (rs *routeTable) startFailed(route *Route, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.failedStart, rs.openErr = route, err
}

// failed returns the route whose start failed last, and why.
func (rs *routeTable) failed() (*Route, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.failedStart, rs.openErr
}

// adopt makes route, whose configuration started serving, the one its
// name's tasks and background work follow.
func (rs *routeTable) adopt(route *Route) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.byName[route.cfg.Name] = route
	rs.current.Store(route)
}

// lookup returns the route a task of name goes through: the one that
// started last, else one provisioned (its configuration is starting).
// Tasks stored before routes were recorded (name "") go through the route
// in charge. Nil: the route is gone.
func (rs *routeTable) lookup(name string) *Route {
	if name == "" {
		return rs.current.Load()
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if route := rs.byName[name]; route != nil {
		return route
	}
	for route := range rs.provisioned {
		if route.cfg.Name == name {
			return route
		}
	}
	return nil
}
