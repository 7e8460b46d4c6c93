package gate

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// IsLoopbackHost answers for every host as the parse it had before its
// fast path for written addresses (net.ParseIP after lowering), and as
// these cases say.
func TestIsLoopbackHost(t *testing.T) {
	t.Parallel()
	reference := func(hostport string) bool {
		host := hostport
		if h, _, err := net.SplitHostPort(hostport); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
		if host == "localhost" || strings.HasSuffix(host, ".localhost") {
			return true
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.IsLoopback()
	}
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1", true}, {"127.0.0.1:8080", true}, {"127.1.2.3:1", true}, {"127.0.0.1.", true},
		{"[::1]:8080", true}, {"::1", true}, {"[::1]", true}, {"::ffff:127.0.0.1", true}, {"[::FFFF:127.0.0.1]:80", true},
		{"[::1%lo]:8080", false}, {"::1%25lo", false}, {"fe80::1%eth0", false},
		{"localhost", true}, {"LOCALHOST:80", true}, {"app.localhost.", true}, {"localhost.:80", true},
		{"10.0.0.1", false}, {"10.0.0.1:80", false}, {"0.0.0.0", false}, {"[::]:80", false}, {"127.0.0.01", false},
		{"example.com", false}, {"127.0.0.1.example.com", false}, {"evil-localhost", false}, {"", false}, {":80", false},
		{"[127.0.0.1]", true}, {"1.2.3.4:notaport", false},
	} {
		if got := IsLoopbackHost(tc.host); got != tc.want || got != reference(tc.host) {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v (before: %v)", tc.host, got, tc.want, reference(tc.host))
		}
	}
}

// A request on a loopback listener is a rebinding suspect when its Host or
// Origin names another host; on any other listener it never is.
func TestRebindingSuspect(t *testing.T) {
	t.Parallel()
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8080}
	for _, tc := range []struct {
		name     string
		listener net.Addr
		host     string
		origin   string
		want     bool
	}{
		{"loopback host", loopback, "127.0.0.1:8080", "", false},
		{"localhost with a loopback origin", loopback, "localhost:8080", "http://[::1]:3000", false},
		{"foreign host", loopback, "attacker.example:8080", "", true},
		{"foreign origin", loopback, "127.0.0.1:8080", "http://attacker.example", true},
		{"unparsable origin", loopback, "127.0.0.1:8080", "http://%zz", true},
		{"public listener", public, "attacker.example", "http://attacker.example", false},
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.listener))
		if got := RebindingSuspect(r); got != tc.want {
			t.Errorf("%s: RebindingSuspect = %v, want %v", tc.name, got, tc.want)
		}
	}
}
