package taskproxy

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
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

// RebindingProtection says when the DNS rebinding guard applies.
type RebindingProtection string

// The guard modes.
const (
	// RebindingAuto guards anonymous requests on a loopback listener that
	// did not come through a trusted proxy. It is the default.
	RebindingAuto RebindingProtection = "auto"
	// RebindingOn guards every request on a loopback listener.
	RebindingOn RebindingProtection = "on"
	// RebindingOff never guards.
	RebindingOff RebindingProtection = "off"
)

// ParseRebindingProtection validates a mode name; "" is RebindingAuto.
func ParseRebindingProtection(s string) (RebindingProtection, error) {
	switch m := RebindingProtection(s); m {
	case "":
		return RebindingAuto, nil
	case RebindingAuto, RebindingOn, RebindingOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want auto, on or off)", s)
}

// rebindingSuspect reports whether r reached a loopback listener under a
// foreign host name.
func rebindingSuspect(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return false
	}
	if !isLoopbackHost(r.Host) {
		return true
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !isLoopbackHost(u.Host) {
			return true
		}
	}
	return false
}

func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	// Names under .localhost are loopback names too (RFC 6761), which
	// browsers resolve to loopback themselves: no rebinding page can be
	// served under them.
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// guarded reports whether the rebinding guard applies to the call.
func (c *call) guarded() bool {
	switch c.g.cfg.RebindingProtection {
	case RebindingOff:
		return false
	case RebindingOn:
		return true
	}
	return c.owner == Anonymous && !peerOf(c.r).ViaTrustedProxy
}

// guardOrigin answers 403 and returns false for a rebinding suspect, and
// 415 for a post a web page could have sent cross-site (crossSiteSimple),
// whoever the caller.
func (c *call) guardOrigin() bool {
	if crossSiteSimple(c.r) {
		writeJSONError(c.w, http.StatusUnsupportedMediaType, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json"))
		return false
	}
	if !c.guarded() || !rebindingSuspect(c.r) {
		return true
	}
	writeJSONError(c.w, http.StatusForbidden, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Forbidden: the Host or Origin header names a host this local server does not serve"))
	return false
}

// crossSiteSimple reports whether r is a post that a web page on any site
// can make a browser send without a CORS preflight, with the gateway's
// ambient credentials attached (cookies of a forward_auth login, cached
// basic_auth credentials): a body declared text/plain or a form type, or
// not declared at all by a page (it carries Origin). MCP posts are
// application/json, and MCP servers refuse others (the official SDKs answer
// 415), so a request passing through meets that check upstream; a request
// the gateway answers, or turns into a task whose call reaches the upstream
// as the gateway's own application/json request, meets it here.
func crossSiteSimple(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return r.Header.Get("Origin") != ""
	}
	return upstream.MediaType(ct) != "application/json"
}
