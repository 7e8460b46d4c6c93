package gate

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

// RebindingSuspect reports whether r reached a loopback listener under a
// foreign host name.
func RebindingSuspect(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return false
	}
	if !IsLoopbackHost(r.Host) {
		return true
	}
	if origin := Header(r.Header, "Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !IsLoopbackHost(u.Host) {
			return true
		}
	}
	return false
}

func IsLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	// An address as it is written, the usual Host of a loopback listener
	// ("127.0.0.1:8080"), is read without lowering or copying it. One
	// with a zone is not an address net.ParseIP reads: it takes the
	// path below, as before.
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && ip.Zone() == "" {
		return ip.IsLoopback()
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

// CrossSiteSimple reports whether r is a post that a web page on any site
// can make a browser send without a CORS preflight, with the gateway's
// ambient credentials attached (cookies of a forward_auth login, cached
// basic_auth credentials): a body declared text/plain or a form type, or
// not declared at all by a page (it carries Origin). MCP posts are
// application/json, and MCP servers refuse others (the official SDKs answer
// 415), so a request passing through meets that check upstream; a request
// the gateway answers, or turns into a task whose call reaches the upstream
// as the gateway's own application/json request, meets it here.
func CrossSiteSimple(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	ct := Header(r.Header, "Content-Type")
	if ct == "" {
		return Header(r.Header, "Origin") != ""
	}
	return upstream.MediaType(ct) != "application/json"
}
