package caddymodule

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// routingDirectives end the handler chain of a request they match (handle,
// handle_path, invoke) or may (route): mcp_tasks placed after one of them is
// skipped for the requests it serves.
var routingDirectives = []string{"invoke", "handle", "handle_path", "route"}

// orderSkipsGateway returns the routing directive that a global order puts
// before mcp_tasks, or "".
func orderSkipsGateway(order []string) string {
	at := slices.Index(order, "mcp_tasks")
	if at < 0 {
		return ""
	}
	for _, dir := range routingDirectives {
		if i := slices.Index(order, dir); i >= 0 && i < at {
			return dir
		}
	}
	return ""
}

// warnOrder warns at adapt time when the Caddyfile's global order option
// overrides the module's order so that a sibling handle or route block
// could serve MCP requests without the gateway and its authentication. The
// adapter sees the order, not the site's blocks: whether one of them does
// is judged when the configuration loads (checkLayout), which refuses it
// for a handler with auth.
func warnOrder(h httpcaddyfile.Helper) {
	order, ok := h.Option("order").([]string)
	if !ok {
		return
	}
	if orderSkipsGateway(order) != "" {
		caddy.Log().Named("http.handlers.mcp_tasks").Warn(
			"the global order option moves mcp_tasks after handle and route blocks (the module orders itself before them): " +
				"a block of a site that matches the gateway's path would answer without the gateway and its auth, " +
				"and caddy validate and caddy run refuse that layout when mcp_tasks has auth; remove the order line")
	}
}
