package gate

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// clientHeaders is the head of a 2025-11-25 client's request as a client
// library sends it, with the headers Caddy adds before the gateway.
func clientHeaders() http.Header {
	return http.Header{
		"Accept":               {"application/json, text/event-stream"},
		"Accept-Encoding":      {"gzip, deflate"},
		"Authorization":        {"Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"},
		"Connection":           {"keep-alive"},
		"Content-Length":       {"86"},
		"Content-Type":         {"application/json"},
		"Mcp-Protocol-Version": {"2025-11-25"},
		"Mcp-Session-Id":       {"c0ffee"},
		"User-Agent":           {"node"},
		"X-Forwarded-For":      {"127.0.0.1"},
		"X-Forwarded-Host":     {"localhost"},
		"X-Forwarded-Proto":    {"http"},
	}
}

// A header that servers mapping headers CGI-style read as Mcp-Session-Id
// is found however the client spelled it, as Go's HTTP servers hand it to
// Caddy: its name read off the wire, canonicalised.
func TestSessionHeaderAlias(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"Mcp-Session-Id", false},
		{"mcp-session-id", false},
		{"Mcp_Session_Id", true},
		{"mcp_session_id", true},
		{"MCP_SESSION_ID", true},
		{"mcp-session_id", true},
		{"mcp_session-id", true},
		{"Mcp-Session_ID", true},
		{"mCp_SeSsIoN-iD", true},
		{"Mcp__Session_Id", false},
		{"Mcp_Session_Ids", false},
		{"Mcp_Sessionid", false},
		{"X_Mcp_Session_Id", false},
		{"Mcp.Session.Id", false},
		{"X_Trace_Id", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw := "POST /mcp HTTP/1.1\r\nHost: example.com\r\nContent-Length: 0\r\n" + tt.name + ": c0ffee\r\n\r\n"
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				t.Fatal(err)
			}
			if got := SessionHeaderAlias(r.Header); got != tt.want {
				t.Errorf("SessionHeaderAlias with %s (read as %v) = %v, want %v", tt.name, r.Header, got, tt.want)
			}
			// Set through http.Header's methods, as a handler before the
			// gateway would: canonicalised the same way.
			h := clientHeaders()
			h.Add(tt.name, "c0ffee")
			if got := SessionHeaderAlias(h); got != tt.want {
				t.Errorf("SessionHeaderAlias with %s added = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

// A request without an alias, the usual case, is checked without walking
// its headers.
func BenchmarkSessionHeaderAlias(b *testing.B) {
	h := clientHeaders()
	b.ReportAllocs()
	for b.Loop() {
		if SessionHeaderAlias(h) {
			b.Fatal("alias found")
		}
	}
}

// The names looked up are the canonical forms of every spelling that reads
// as Mcp-Session-Id with an underscore for a hyphen: as many as there are
// such spellings, each canonical.
func TestSessionHeaderAliasNames(t *testing.T) {
	t.Parallel()
	want := map[string]bool{}
	for _, a := range []string{"-", "_"} {
		for _, b := range []string{"-", "_"} {
			if a+b != "--" {
				want[http.CanonicalHeaderKey("mcp"+a+"session"+b+"id")] = true
			}
		}
	}
	if len(sessionHeaderAliases) != len(want) {
		t.Errorf("%d names looked up, want %d: %v", len(sessionHeaderAliases), len(want), want)
	}
	for _, name := range sessionHeaderAliases {
		if !want[name] {
			t.Errorf("%q is not the canonical form of a spelling of the session header", name)
		}
	}
}
