package caddymodule

import (
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"go.uber.org/zap"
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
// could serve MCP requests without the gateway and its authentication.
func warnOrder(h httpcaddyfile.Helper) {
	order, ok := h.Option("order").([]string)
	if !ok {
		return
	}
	if dir := orderSkipsGateway(order); dir != "" {
		caddy.Log().Named("http.handlers.mcp_tasks").Warn(
			"the global order option puts mcp_tasks after "+dir+": requests a sibling "+dir+" block serves skip the gateway and its auth; "+
				"remove the order line (mcp_tasks orders itself before "+dir+") or put mcp_tasks inside that block",
			zap.String("directive", dir))
	}
}
