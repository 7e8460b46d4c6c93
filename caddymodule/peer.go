package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// withPeer tells the core what Caddy determined of the client: its address
// (client_ip, from forwarding headers only when the connection came from one
// of the server's trusted_proxies) and whether a trusted proxy sent it.
func withPeer(r *http.Request) *http.Request {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if ip == "" {
		return r
	}
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return taskproxy.WithPeer(r, task.Peer{ClientIP: ip, ViaTrustedProxy: trusted})
}
