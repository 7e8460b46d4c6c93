package taskproxy

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// DNS rebinding protection for what the gateway answers itself. The spec has
// servers validate Origin and Host; for requests that pass through, the
// upstream does, but tasks and their results never reach it. The rule is the
// usual one for local servers: a request that arrived on a loopback address
// must name a loopback host, in Host and in Origin when it has one.

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
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// guardOrigin answers 403 and returns false for a rebinding suspect.
func (c *call) guardOrigin() bool {
	if !rebindingSuspect(c.r) {
		return true
	}
	writeJSONError(c.w, http.StatusForbidden, c.msg.ID, Errorf(CodeInvalidRequest, "Forbidden: the Host or Origin header names a host this local server does not serve"))
	return false
}
