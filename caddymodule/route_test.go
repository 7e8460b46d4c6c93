package caddymodule

import (
	"context"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Handlers of one server are told apart by their order; the count starts
// again for every server (of every configuration loaded).
func TestRouteID(t *testing.T) {
	s1, s2 := new(caddyhttp.Server), new(caddyhttp.Server)
	defer forgetServer(s1)
	defer forgetServer(s2)
	ctxOf := func(srv *caddyhttp.Server) caddy.Context {
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.WithValue(context.Background(), caddyhttp.ServerCtxKey, srv)})
		t.Cleanup(cancel)
		return ctx
	}
	tests := []struct {
		srv  *caddyhttp.Server
		want string
	}{{s1, "#0"}, {s1, "#1"}, {s2, "#0"}, {s1, "#2"}}
	for _, tt := range tests {
		got, srv := routeID(ctxOf(tt.srv))
		if got != tt.want || srv != tt.srv {
			t.Errorf("routeID = %q, %p; want %q, %p", got, srv, tt.want, tt.srv)
		}
	}
	forgetServer(s1)
	if got, _ := routeID(ctxOf(s1)); got != "#0" {
		t.Errorf("after the server's cleanup: %q, want #0 (a new configuration)", got)
	}
}
