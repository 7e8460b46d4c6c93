package caddymodule

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"go.uber.org/zap"
)

// A route list runs its matching routes in order, and a route that answers
// (reverse_proxy, respond, a terminal handle block, …) ends the chain: an
// mcp_tasks route after one that matches the same requests never runs, and
// neither does its authentication. The Caddyfile order of the module avoids
// that for sibling directives; what it cannot see (a global order option, a
// route block's written order, hand-written JSON) is found here, at load,
// from the route list being provisioned: an error when the handler
// authenticates (the layout would let requests reach the upstream
// unauthenticated), a warning otherwise.

// answeringHandlers are the module ids of handlers that write the response.
var answeringHandlers = map[string]bool{
	"http.handlers.reverse_proxy":   true,
	"http.handlers.static_response": true,
	"http.handlers.file_server":     true,
	"http.handlers.error":           true,
	"http.handlers.invoke":          true,
	"http.handlers.acme_server":     true,
	"http.handlers.metrics":         true,
	"http.handlers.copy_response":   true,
}

// layoutBypass is a layout in which some requests of the gateway's path
// reach an answering handler without running mcp_tasks: its message says
// what the config does and how to fix it.
type layoutBypass struct {
	msg    string
	fields []zap.Field
	// proxies says the handler that runs first sends the requests on to an
	// upstream (reverse_proxy, invoke): with auth configured, they would
	// reach it unauthenticated. One that answers itself (respond,
	// file_server, …) only keeps them from the gateway.
	proxies bool
	// outer says the handler runs first from an enclosing route list (a
	// handle block beside the one holding mcp_tasks) whose matchers may or
	// may not take the gateway's requests: told, never refused.
	outer bool
}

// refused reports whether the bypass must fail the load of a handler that
// authenticates.
func (b *layoutBypass) refused() bool { return b.proxies && !b.outer }

func (b *layoutBypass) Error() string { return b.msg }

// checkLayout reports whether an earlier route of the route list that holds
// this handler, or an earlier handler of its own route, may answer requests
// before mcp_tasks runs, or a later route answers what lies below exact
// paths of mcp_tasks; nil when neither. It must be called from Provision,
// while Caddy provisions that list in order.
func checkLayout(ctx caddy.Context) *layoutBypass {
	mods := ctx.Modules()
	if len(mods) < 2 {
		return nil
	}
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	var where []zap.Field
	if srv != nil { // with many sites, say which one
		where = append(where, zap.String("server", srv.Name()))
	}
	var routes caddyhttp.RouteList
	switch parent := mods[len(mods)-2].(type) {
	case *caddyhttp.Subroute:
		routes = parent.Routes
	case *caddyhttp.App:
		// The server being provisioned, not any server with an mcp_tasks
		// route still to load: Caddy provisions its servers one by one, in
		// map order, so before the last one every later server's routes
		// look like that too, and the check would judge another site.
		if srv == nil {
			return nil
		}
		routes = srv.Routes
	default:
		return nil
	}
	k, pos := currentRoute(routes)
	if k < 0 {
		return nil
	}
	// Caddy merges sibling directives with equal matchers into one route, so
	// what runs first may be an earlier handler of this very route.
	for _, raw := range routes[k].HandlersRaw[:pos] {
		if rawAnswers(raw) {
			name := handlerName(raw)
			return &layoutBypass{
				msg: describeHandler(name) + " runs before mcp_tasks in the same route and answers its requests first: " +
					"they skip the gateway and its auth; " + putFirst,
				fields:  append(where, zap.String("earlier_handler", name)),
				proxies: rawProxies(raw),
			}
		}
	}
	if b := answeredBefore(routes, k, where); b != nil {
		return b
	}
	if b := uncovered(routes, k, where); b != nil {
		return b
	}
	return outerBypass(mods[:len(mods)-2], srv, where)
}

// answeredBefore reports an earlier route of routes that may answer
// requests of route k before it runs.
func answeredBefore(routes caddyhttp.RouteList, k int, where []zap.Field) *layoutBypass {
	for j := range k {
		if routeAnswers(routes[j]) && mayOverlap(routes[j].MatcherSets, routes[k].MatcherSets) {
			return &layoutBypass{
				msg: fmt.Sprintf("route %d (%s) matches requests of mcp_tasks' route %d and answers them before mcp_tasks runs: "+
					"they skip the gateway and its auth; %s", j, describeRoute(routes[j]), k, putFirst),
				fields:  append(where, zap.Int("route", k), zap.Int("earlier_route", j), zap.Strings("earlier_handlers", handlerNames(routes[j]))),
				proxies: routeProxies(routes[j]),
			}
		}
	}
	return nil
}

// outerBypass looks at the route lists enclosing the one that holds
// mcp_tasks (ancestors, innermost first: the handle and route blocks it
// sits in, then the server's routes): an earlier route there whose
// matchers may take requests of the block holding mcp_tasks answers them
// first, as a handle block with a query or header matcher beside the one
// holding the gateway does. Whether its matchers take the gateway's
// requests in practice cannot be told, so it is a warning only.
func outerBypass(ancestors []caddy.Module, srv *caddyhttp.Server, where []zap.Field) *layoutBypass {
	for _, ancestor := range slices.Backward(ancestors) {
		var routes caddyhttp.RouteList
		switch a := ancestor.(type) {
		case *caddyhttp.Subroute:
			routes = a.Routes
		case *caddyhttp.App:
			if srv == nil {
				return nil
			}
			routes = srv.Routes
		default:
			continue
		}
		k := loadingRoute(routes)
		if k < 0 {
			return nil
		}
		if b := answeredBefore(routes, k, where); b != nil {
			b.outer = true
			b.msg = "in an enclosing route list, " + b.msg + " (if its matchers never take the gateway's requests, ignore this)"
			return b
		}
	}
	return nil
}

// loadingRoute returns the index of the route whose handlers are being
// loaded (the first one not yet loaded), or -1.
func loadingRoute(routes caddyhttp.RouteList) int {
	for i, r := range routes {
		if r.Handlers == nil && r.HandlersRaw != nil {
			return i
		}
	}
	return -1
}

// putFirst is what to do about a handler that runs before mcp_tasks.
const putFirst = "put mcp_tasks first (in a route block, write it before the others; drop a global order line for mcp_tasks, " +
	"which puts handle and route blocks before it; or put mcp_tasks inside that block)"

// describeHandler names a handler as the Caddyfile wrote it where that can
// be told: a handle or route block is a subroute.
func describeHandler(name string) string {
	switch name {
	case "subroute":
		return "a handle or route block"
	case "static_response":
		return "static_response (respond or redir)"
	}
	return name
}

// describeRoute says what a loaded route is, as its Caddyfile wrote it
// where that can be told: its path matcher and its handlers (a handle or
// route block is a subroute).
func describeRoute(r caddyhttp.Route) string {
	var paths []string
	for _, set := range r.MatcherSets {
		paths = append(paths, setPaths(set)...)
	}
	what := describeHandler(strings.Join(handlerNames(r), ", "))
	if r.Terminal && what == "" {
		what = "a terminal route"
	}
	if len(paths) > 0 {
		what += " for " + strings.Join(paths, " ")
	}
	return what
}

// uncovered reports mcp_tasks matching exact paths only (mcp_tasks /mcp)
// while a later route that answers matches what lies below them (/mcp/):
// MCP servers that serve their endpoint with a trailing slash (or redirect
// to it) are then reached without the gateway and its auth. Later routes'
// matchers are provisioned before any handler, so they can be read here;
// their handlers are read from their JSON.
func uncovered(routes caddyhttp.RouteList, k int, where []zap.Field) *layoutBypass {
	var below caddyhttp.MatcherSets
	var exact []string
	for _, set := range routes[k].MatcherSets {
		paths := setPaths(set)
		if paths == nil {
			return nil // not (only) a path: nothing to compare
		}
		for _, p := range paths {
			if strings.HasSuffix(p, "*") {
				return nil // the pattern covers what lies below it
			}
			exact = append(exact, p)
			below = append(below, caddyhttp.MatcherSet{caddyhttp.MatchPath{strings.TrimSuffix(p, "/") + "/*"}})
		}
	}
	if len(below) == 0 {
		return nil
	}
	for j := k + 1; j < len(routes); j++ {
		answers := routes[j].Terminal
		for _, raw := range routes[j].HandlersRaw {
			answers = answers || rawAnswers(raw)
		}
		if answers && mayOverlap(routes[j].MatcherSets, below) {
			proxies := false
			for _, raw := range routes[j].HandlersRaw {
				proxies = proxies || rawProxies(raw)
			}
			return &layoutBypass{
				proxies: proxies,
				msg: "mcp_tasks matches exact paths only (" + strings.Join(exact, " ") + "), and a later handler answers the paths below them " +
					"(such as " + strings.TrimSuffix(exact[0], "/") + "/), without the gateway and its auth: " +
					"match the endpoint with a trailing * (mcp_tasks " + strings.TrimSuffix(exact[0], "/") + "*)",
				fields: append(where, zap.Int("route", k), zap.Int("later_route", j)),
			}
		}
	}
	return nil
}

// currentRoute returns the index of the route whose handlers are being
// loaded (the first one not yet loaded) and the position of mcp_tasks among
// them; -1 when that route holds no mcp_tasks handler.
func currentRoute(routes caddyhttp.RouteList) (int, int) {
	for i, r := range routes {
		if r.Handlers != nil || r.HandlersRaw == nil { // loaded, or nothing to load
			continue
		}
		for pos, raw := range r.HandlersRaw {
			if handlerName(raw) == "mcp_tasks" {
				return i, pos
			}
		}
		return -1, -1
	}
	return -1, -1
}

// rawRoute is what rawAnswers reads of a route's JSON.
type rawRoute struct {
	Terminal bool              `json:"terminal"`
	Handle   []json.RawMessage `json:"handle"`
}

// rawHandler is what rawAnswers reads of a handler's JSON.
type rawHandler struct {
	Handler string     `json:"handler"`
	Routes  []rawRoute `json:"routes"`
	// HandleResponse is reverse_proxy's: routes for some answers of the
	// upstream, which fall through to the next handler unless they answer.
	HandleResponse []struct {
		Match *struct {
			StatusCode []int `json:"status_code"`
		} `json:"match"`
		StatusCode any        `json:"status_code"`
		Routes     []rawRoute `json:"routes"`
	} `json:"handle_response"`
}

func handlerName(raw json.RawMessage) string {
	var h rawHandler
	_ = json.Unmarshal(raw, &h)
	return h.Handler
}

// rawAnswers is routeAnswers for a handler not yet loaded.
func rawAnswers(raw json.RawMessage) bool {
	var h rawHandler
	if json.Unmarshal(raw, &h) != nil {
		return false
	}
	if h.Handler == "reverse_proxy" {
		// forward_auth is a reverse_proxy whose handle_response routes
		// for the auth service's 2xx answer copy headers and fall through:
		// it answers only the requests it refuses, which never reach the
		// upstream either. A proxy whose successful answers pass on is
		// such a gate.
		for _, rh := range h.HandleResponse {
			passes2xx := rh.Match == nil || matches2xx(rh.Match.StatusCode)
			if passes2xx && (rh.StatusCode == nil || rh.StatusCode == "") && !rawRoutesAnswer(rh.Routes) {
				return false
			}
		}
	}
	if h.Handler != "subroute" {
		return answeringHandlers["http.handlers."+h.Handler]
	}
	return rawRoutesAnswer(h.Routes)
}

// rawProxies reports whether a handler not yet loaded may send requests on
// to an upstream: a reverse_proxy that answers (not a forward_auth gate,
// see rawAnswers), an invoke, or a subroute holding one.
func rawProxies(raw json.RawMessage) bool {
	var h rawHandler
	if json.Unmarshal(raw, &h) != nil {
		return false
	}
	switch h.Handler {
	case "reverse_proxy":
		return rawAnswers(raw)
	case "invoke":
		return true
	case "subroute":
		for _, r := range h.Routes {
			if slices.ContainsFunc(r.Handle, rawProxies) {
				return true
			}
		}
	}
	return false
}

// routeProxies is rawProxies of a loaded route's handlers.
func routeProxies(r caddyhttp.Route) bool {
	for _, h := range r.Handlers {
		switch h := h.(type) {
		case *caddyhttp.Subroute:
			if slices.ContainsFunc(h.Routes, routeProxies) {
				return true
			}
		case *reverseproxy.Handler:
			if !passesOn(h) {
				return true
			}
		case caddy.Module:
			if h.CaddyModule().ID == "http.handlers.invoke" {
				return true
			}
		}
	}
	return false
}

// rawRoutesAnswer reports whether a route list not yet loaded may end the
// handler chain.
func rawRoutesAnswer(routes []rawRoute) bool {
	for _, r := range routes {
		if r.Terminal {
			return true
		}
		if slices.ContainsFunc(r.Handle, rawAnswers) {
			return true
		}
	}
	return false
}

// routeAnswers reports whether a matched route may end the handler chain.
func routeAnswers(r caddyhttp.Route) bool {
	if r.Terminal {
		return true
	}
	for _, h := range r.Handlers {
		if sub, ok := h.(*caddyhttp.Subroute); ok {
			if slices.ContainsFunc(sub.Routes, routeAnswers) {
				return true
			}
			continue
		}
		if rp, ok := h.(*reverseproxy.Handler); ok && passesOn(rp) {
			continue // forward_auth: see rawAnswers
		}
		if mod, ok := h.(caddy.Module); ok && answeringHandlers[string(mod.CaddyModule().ID)] {
			return true
		}
	}
	return false
}

// passesOn reports whether a loaded reverse_proxy hands the upstream's
// successful answers to the next handler, as forward_auth does for the auth
// service's 2xx: routes of its handle_response for them that do not answer.
func passesOn(rp *reverseproxy.Handler) bool {
	for _, rh := range rp.HandleResponse {
		if rh.StatusCode != "" {
			continue // changes the status, then answers as usual
		}
		if rh.Match != nil && !matches2xx(rh.Match.StatusCode) {
			continue // other answers pass on; successful ones are answered
		}
		answers := false
		for _, r := range rh.Routes {
			answers = answers || routeAnswers(r)
		}
		if !answers {
			return true
		}
	}
	return false
}

// matches2xx reports whether a response matcher's status codes (a class
// such as 2, or full codes) take in successful answers.
func matches2xx(codes []int) bool {
	for _, c := range codes {
		if c == 2 || c >= 200 && c < 300 {
			return true
		}
	}
	return false
}

func handlerNames(r caddyhttp.Route) []string {
	var names []string
	for _, h := range r.Handlers {
		if mod, ok := h.(caddy.Module); ok {
			names = append(names, mod.CaddyModule().ID.Name())
		}
	}
	return names
}

// mayOverlap reports whether some request could match both matcher sets.
// Only path matchers are compared; anything else is assumed to overlap.
func mayOverlap(a, b caddyhttp.MatcherSets) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, sa := range a {
		for _, sb := range b {
			pa, pb := setPaths(sa), setPaths(sb)
			if pa == nil || pb == nil {
				return true
			}
			for _, x := range pa {
				for _, y := range pb {
					if pathsOverlap(x, y) {
						return true
					}
				}
			}
		}
	}
	return false
}

// setPaths returns the path patterns of a matcher set, nil when it has no
// path matcher.
func setPaths(set caddyhttp.MatcherSet) []string {
	for _, m := range set {
		switch p := m.(type) {
		case caddyhttp.MatchPath:
			return p
		case *caddyhttp.MatchPath:
			return *p
		}
	}
	return nil
}

// pathsOverlap compares two path patterns of the path matcher: exact, or a
// prefix with a trailing *. Other wildcards are assumed to overlap.
func pathsOverlap(x, y string) bool {
	x, y = strings.ToLower(x), strings.ToLower(y)
	px, okx := prefixPattern(x)
	py, oky := prefixPattern(y)
	switch {
	case !okx || !oky:
		return true
	case strings.HasSuffix(x, "*") && strings.HasSuffix(y, "*"):
		return strings.HasPrefix(px, py) || strings.HasPrefix(py, px)
	case strings.HasSuffix(x, "*"):
		return strings.HasPrefix(y, px)
	case strings.HasSuffix(y, "*"):
		return strings.HasPrefix(x, py)
	}
	return x == y
}

// prefixPattern returns the literal part of an exact or trailing-* pattern;
// false for any other wildcard.
func prefixPattern(p string) (string, bool) {
	lit := strings.TrimSuffix(p, "*")
	return lit, !strings.ContainsAny(lit, "*%")
}
