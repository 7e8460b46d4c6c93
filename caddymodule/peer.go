package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// peerOf tells the core what Caddy determined of the client of r (the
// gateway's Config.Peer): its address (client_ip, from forwarding headers
// only when the connection came from one of the server's trusted_proxies)
// and whether a trusted proxy sent it. It is read from Caddy's variables
// when a request needs it, rather than copied into every request.
func peerOf(r *http.Request) (task.Peer, bool) {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	if ip == "" {
		return task.Peer{}, false
	}
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return task.Peer{ClientIP: ip, ViaTrustedProxy: trusted}, true
}
