package caddymodule

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

func TestPathsOverlap(t *testing.T) {
	tests := []struct {
		x, y string
		want bool
	}{
		{"/mcp*", "/mcp*", true},
		{"/mcp*", "/mcp/*", true},
		{"/mcp*", "/mcp", true},
		{"/mcp", "/mcp", true},
		{"/MCP", "/mcp", true},
		{"/mcp", "/other", false},
		{"/mcp*", "/other*", false},
		{"/mcp/*", "/mcp", false},
		{"*", "/mcp", true},
		{"*.php", "/mcp", true},
		{"/a/*/b", "/mcp", true},
	}
	for _, tt := range tests {
		if got := pathsOverlap(tt.x, tt.y); got != tt.want {
			t.Errorf("pathsOverlap(%q, %q) = %v", tt.x, tt.y, got)
		}
	}
}

func TestRouteShadowing(t *testing.T) {
	path := func(p ...string) caddyhttp.MatcherSets {
		m := caddyhttp.MatchPath(p)
		return caddyhttp.MatcherSets{{&m}}
	}
	host := caddyhttp.MatcherSets{{caddyhttp.MatchHost{"example.com"}}}
	tests := []struct {
		name    string
		earlier caddyhttp.Route
		ours    caddyhttp.MatcherSets
		want    bool
	}{
		{"terminal handle on the same path", caddyhttp.Route{Terminal: true, MatcherSets: path("/mcp*")}, path("/mcp*"), true},
		{"reverse_proxy without matcher", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.StaticResponse{}}}, path("/mcp*"), true},
		{"respond on another path", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.StaticResponse{}}, MatcherSets: path("/health")}, path("/mcp*"), false},
		{"subroute that answers", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{Routes: caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.StaticResponse{}}}}}}}, nil, true},
		{"subroute that does not", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.Subroute{}}}, nil, false},
		{"host matcher", caddyhttp.Route{Terminal: true, MatcherSets: host}, path("/mcp*"), true},
		{"reverse_proxy", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&reverseproxy.Handler{}}}, path("/mcp*"), true},
		// forward_auth: its 2xx routes copy headers and fall through.
		{"forward_auth", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&reverseproxy.Handler{HandleResponse: []caddyhttp.ResponseHandler{
			{Routes: caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{caddyhttp.VarsMiddleware{}}}}}}}}}, path("/mcp*"), false},
		{"reverse_proxy copying the answer in handle_response", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&reverseproxy.Handler{HandleResponse: []caddyhttp.ResponseHandler{
			{Routes: caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.StaticResponse{}}}}}}}}}, path("/mcp*"), true},
		{"reverse_proxy changing a status in handle_response", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&reverseproxy.Handler{HandleResponse: []caddyhttp.ResponseHandler{
			{StatusCode: "404"}}}}}, path("/mcp*"), true},
		{"reverse_proxy passing on only its 404s", caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&reverseproxy.Handler{HandleResponse: []caddyhttp.ResponseHandler{
			{Match: &caddyhttp.ResponseMatcher{StatusCode: []int{404}}, Routes: caddyhttp.RouteList{{Handlers: []caddyhttp.MiddlewareHandler{caddyhttp.VarsMiddleware{}}}}}}}}}, path("/mcp*"), true},
	}
	for _, tt := range tests {
		got := routeAnswers(tt.earlier) && mayOverlap(tt.earlier.MatcherSets, tt.ours)
		if got != tt.want {
			t.Errorf("%s: shadows = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCurrentRoute(t *testing.T) {
	raw := func(handlers ...string) []json.RawMessage {
		var out []json.RawMessage
		for _, h := range handlers {
			out = append(out, json.RawMessage(h))
		}
		return out
	}
	const proxy, gateway = `{"handler":"reverse_proxy"}`, `{"handler":"mcp_tasks"}`
	const forwardAuth = `{"handler":"reverse_proxy","handle_response":[{"match":{"status_code":[2]},"routes":[` +
		`{"handle":[{"handler":"vars"}]},` +
		`{"handle":[{"handler":"headers","request":{"set":{"X-Auth-User":["{http.reverse_proxy.header.X-Auth-User}"]}}}],` +
		`"match":[{"not":[{"vars":{"{http.reverse_proxy.header.X-Auth-User}":[""]}}]}]}]}],` +
		`"rewrite":{"method":"GET","uri":"/auth"},"upstreams":[{"dial":"127.0.0.1:9000"}]}`
	loaded := caddyhttp.Route{Handlers: []caddyhttp.MiddlewareHandler{&caddyhttp.StaticResponse{}}}
	tests := []struct {
		name     string
		routes   caddyhttp.RouteList
		k, pos   int
		answered bool // a handler before mcp_tasks in its route answers
	}{
		{"after a loaded route", caddyhttp.RouteList{loaded, {HandlersRaw: raw(gateway)}, {HandlersRaw: raw(proxy)}}, 1, 0, false},
		{"merged route, proxy first", caddyhttp.RouteList{{HandlersRaw: raw(proxy, gateway)}}, 0, 1, true},
		{"merged route, handle block first", caddyhttp.RouteList{{HandlersRaw: raw(`{"handler":"subroute","routes":[{"handle":[`+proxy+`]}]}`, gateway)}}, 0, 1, true},
		{"header first", caddyhttp.RouteList{{HandlersRaw: raw(`{"handler":"headers"}`, gateway, proxy)}}, 0, 1, false},
		// What "forward_auth /mcp* …" adapts to: a reverse_proxy whose
		// handle_response routes for the auth service's 2xx copy headers
		// and fall through to mcp_tasks; it answers only refused requests.
		{"forward_auth first", caddyhttp.RouteList{{HandlersRaw: raw(forwardAuth, gateway, proxy)}}, 0, 1, false},
		{"proxy copying the answer in handle_response first", caddyhttp.RouteList{{HandlersRaw: raw(
			`{"handler":"reverse_proxy","handle_response":[{"routes":[{"handle":[{"handler":"copy_response"}]}]}]}`, gateway)}}, 0, 1, true},
		{"proxy changing a status in handle_response first", caddyhttp.RouteList{{HandlersRaw: raw(
			`{"handler":"reverse_proxy","handle_response":[{"status_code":404}]}`, gateway)}}, 0, 1, true},
		{"proxy passing on only its 404s first", caddyhttp.RouteList{{HandlersRaw: raw(
			`{"handler":"reverse_proxy","handle_response":[{"match":{"status_code":[404]},"routes":[{"handle":[{"handler":"vars"}]}]}]}`, gateway)}}, 0, 1, true},
		{"another route is loading", caddyhttp.RouteList{loaded, {HandlersRaw: raw(proxy)}, {HandlersRaw: raw(gateway)}}, -1, -1, false},
		{"after an empty route", caddyhttp.RouteList{{}, loaded, {HandlersRaw: raw(gateway)}}, 2, 0, false},
		{"mcp_tasks nested deeper", caddyhttp.RouteList{{HandlersRaw: raw(`{"handler":"subroute","routes":[{"handle":[` + gateway + `]}]}`)}}, -1, -1, false},
	}
	for _, tt := range tests {
		k, pos := currentRoute(tt.routes)
		if k != tt.k || pos != tt.pos {
			t.Errorf("%s: route %d position %d, want %d %d", tt.name, k, pos, tt.k, tt.pos)
			continue
		}
		answered := false
		if k >= 0 {
			for _, r := range tt.routes[k].HandlersRaw[:pos] {
				answered = answered || rawAnswers(r)
			}
		}
		if answered != tt.answered {
			t.Errorf("%s: answered before mcp_tasks = %v", tt.name, answered)
		}
	}
}

// mcp_tasks on exact paths beside a later handler that answers below them
// (/mcp/) is found; a trailing * or unrelated paths are not.
func TestUncoveredBelowExactPaths(t *testing.T) {
	path := func(p ...string) caddyhttp.MatcherSets {
		m := caddyhttp.MatchPath(p)
		return caddyhttp.MatcherSets{{&m}}
	}
	gateway := caddyhttp.Route{HandlersRaw: []json.RawMessage{json.RawMessage(`{"handler":"mcp_tasks"}`)}}
	proxy := func(m caddyhttp.MatcherSets) caddyhttp.Route {
		return caddyhttp.Route{MatcherSets: m, HandlersRaw: []json.RawMessage{json.RawMessage(`{"handler":"reverse_proxy"}`)}}
	}
	tests := []struct {
		name  string
		ours  caddyhttp.MatcherSets
		later caddyhttp.Route
		warn  bool
	}{
		{"exact path, proxy for everything", path("/mcp"), proxy(nil), true},
		{"exact path, proxy below it", path("/mcp"), proxy(path("/mcp/*")), true},
		{"exact path with slash, proxy for everything", path("/mcp/"), proxy(nil), true},
		{"trailing *", path("/mcp*"), proxy(nil), false},
		{"exact path, proxy elsewhere", path("/mcp"), proxy(path("/api/*")), false},
		{"exact path, later route does not answer", path("/mcp"), caddyhttp.Route{HandlersRaw: []json.RawMessage{json.RawMessage(`{"handler":"headers"}`)}}, false},
		{"no path matcher", caddyhttp.MatcherSets{{caddyhttp.MatchHost{"example.com"}}}, proxy(nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ours := gateway
			ours.MatcherSets = tt.ours
			if got := uncovered(caddyhttp.RouteList{ours, tt.later}, 0, nil) != nil; got != tt.warn {
				t.Errorf("found = %v, want %v", got, tt.warn)
			}
		})
	}
}
