package caddymodule

import (
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Route identity. A task remembers the handler instance that created it,
// so that a re-run after a restart goes through that instance's next
// handler with that instance's retry_on_restart list. The identity must be
// the same after a restart with the same configuration: it is derived
// from the name of the handler's server (srv0, srv1, ... from a Caddyfile,
// in the order of their addresses) and the handler's position among the
// mcp_tasks handlers of that server (Caddy provisions a server's routes,
// subroutes included, in order). It deliberately leaves the handler's own
// settings and the listen port out, so that changing them (adding a tool to
// retry_on_restart, say) does not orphan the route's tasks; adding a site
// or route before another one does change it.

// ordinals counts the mcp_tasks handlers provisioned so far per server of
// the configuration being loaded; an entry is dropped when the server's
// handlers are cleaned up.
var ordinals = struct {
	sync.Mutex
	n map[*caddyhttp.Server]int
}{n: map[*caddyhttp.Server]int{}}

// routeID returns the identity of the handler being provisioned in ctx and
// the server it belongs to (nil outside an HTTP server).
func routeID(ctx caddy.Context) (string, *caddyhttp.Server) {
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	name := ""
	if srv != nil {
		name = srv.Name()
	}
	ordinals.Lock()
	pos := ordinals.n[srv]
	ordinals.n[srv] = pos + 1
	ordinals.Unlock()
	return fmt.Sprintf("%s#%d", name, pos), srv
}

// forgetServer drops the count of a server whose configuration is cleaned
// up; by then its handlers are all provisioned.
func forgetServer(srv *caddyhttp.Server) {
	ordinals.Lock()
	delete(ordinals.n, srv)
	ordinals.Unlock()
}

// servedTrust holds, per store and route position ("<store id> srv0#0"),
// the trust domain of the route of the configuration that last started
// serving there. Owner keys include it, so a reload that changes it (an
// hmac_secret added for a rotation, another audience, auth added or
// removed) leaves the tasks and sessions of the route's callers behind,
// unreachable to their owners: the new configuration's handler compares,
// and warns.
var servedTrust = struct {
	sync.Mutex
	m map[string]string
}{m: map[string]string{}}

// servedTrustDomain returns the trust domain of the route serving at key,
// if a configuration of this process started serving there.
func servedTrustDomain(key string) (string, bool) {
	servedTrust.Lock()
	defer servedTrust.Unlock()
	domain, ok := servedTrust.m[key]
	return domain, ok
}

// serveTrustDomain records that a route of trust domain domain serves at
// key now.
func serveTrustDomain(key, domain string) {
	servedTrust.Lock()
	servedTrust.m[key] = domain
	servedTrust.Unlock()
}
