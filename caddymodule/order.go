package caddymodule

import (
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// routingDirectives end the handler chain of a request they match (handle,
// handle_path, invoke) or may (route): mcp_tasks placed after one of them is
// skipped for the requests it serves. The block directives come first: in
// Caddy's order invoke precedes them, so an order that moves mcp_tasks
// after a block also puts it after invoke, which a site rarely uses.
var routingDirectives = []string{"handle", "handle_path", "route", "invoke"}

// orderSkipsGateway returns the routing directives that a global order puts
// before mcp_tasks: the blocks (handle, handle_path, route) when any is,
// else invoke when it is; nil when none is.
func orderSkipsGateway(order []string) []string {
	at := slices.Index(order, "mcp_tasks")
	if at < 0 {
		return nil
	}
	var before []string
	for _, dir := range routingDirectives {
		if i := slices.Index(order, dir); i >= 0 && i < at {
			if dir == "invoke" && len(before) > 0 {
				break // named only when the order put mcp_tasks right after it
			}
			before = append(before, dir)
		}
	}
	return before
}

// warnOrder warns at adapt time when the Caddyfile's global order option
// overrides the module's order so that a sibling handle or route block
// could serve MCP requests without the gateway and its authentication. The
// adapter sees the order, not the site's blocks: whether one of them does
// is judged when the configuration loads (checkLayout), which refuses it
// for a handler with auth.
// It warns once per adaptation, however many mcp_tasks directives the
// Caddyfile has: the order is global, and so is the advice.
func warnOrder(h httpcaddyfile.Helper) {
	order, ok := h.Option("order").([]string)
	if !ok {
		return
	}
	const warned = "mcp_tasks.order_warned"
	if h.State[warned] != nil {
		return
	}
	h.State[warned] = true
	if dirs := orderSkipsGateway(order); dirs != nil {
		caddy.Log().Named("http.handlers.mcp_tasks").Warn(
			"the global order option moves mcp_tasks after " + strings.Join(dirs, ", ") +
				" (the module orders itself before them): a block of a site that matches the gateway's path would answer " +
				"without the gateway and its auth, and caddy validate and caddy run refuse that layout when mcp_tasks has auth; " +
				"remove the order line")
	}
}
