package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The Caddyfile adapter names the trust domain of a principal placeholder
// after its site block, so two sites behind different authentication never
// share principals; two principal routes in one site must be named.
func TestPrincipalTrustDomainDefault(t *testing.T) {
	adapt := func(body string) (string, error) {
		out, _, err := caddyfile.Adapter{ServerType: httpcaddyfile.ServerType{}}.Adapt([]byte(body), nil)
		return string(out), err
	}
	tests := []struct {
		name    string
		body    string
		want    []string
		wantErr string
	}{
		{name: "one per site", body: `
a.example.com, b.example.com {
	mcp_tasks {
		principal {http.auth.user.id}
	}
}
c.example.com {
	handle /mcp* {
		mcp_tasks {
			principal {http.auth.user.id}
		}
	}
}`, want: []string{`"trust_domain":"site a.example.com b.example.com"`, `"trust_domain":"site c.example.com"`}},
		{name: "explicit name kept", body: `
a.example.com {
	mcp_tasks {
		principal {http.auth.user.id}
		trust_domain staff
	}
}`, want: []string{`"trust_domain":"staff"`}},
		{name: "jwt is not defaulted", body: `
a.example.com {
	mcp_tasks {
		auth jwt {
			hmac_secret x
		}
	}
}`, want: []string{`"handler":"mcp_tasks"`}},
		{name: "two in one site refused", body: `
a.example.com {
	handle /a* {
		mcp_tasks {
			principal {http.auth.user.id}
		}
	}
	handle /b* {
		mcp_tasks {
			principal {http.auth.user.id}
		}
	}
}`, wantErr: "set trust_domain"},
		{name: "two in one site, named", body: `
a.example.com {
	handle /a* {
		mcp_tasks {
			principal {http.auth.user.id}
			trust_domain a
		}
	}
	handle /b* {
		mcp_tasks {
			principal {http.auth.user.id}
			trust_domain b
		}
	}
}`, want: []string{`"trust_domain":"a"`, `"trust_domain":"b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := adapt(tt.body)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("adapt = %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("adapted config lacks %s:\n%s", w, out)
				}
			}
			if strings.Contains(tt.name, "jwt") && strings.Contains(out, "trust_domain") {
				t.Errorf("a JWT route got a trust domain: %s", out)
			}
		})
	}
}

// A principal placeholder's owner key depends on its trust domain and
// placeholder, and on nothing else: stable across provisions.
func TestPlaceholderOwnerKeys(t *testing.T) {
	owner := func(p placeholderPrincipal, who string) string {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		repl := caddy.NewReplacer()
		repl.Set("http.auth.user.id", who)
		repl.Set("http.request.header.X-User", who)
		r = r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
		got := p.authenticate(httptest.NewRecorder(), r)
		if got == nil {
			t.Fatalf("%+v refused %q", p, who)
		}
		return task.CallerOf(got.Context()).Owner
	}
	const user = "{http.auth.user.id}"
	site1 := owner(newPlaceholderPrincipal(user, "site a.example.com"), "alice")
	tests := []struct {
		name string
		key  string
		same bool
	}{
		{"same configuration again", owner(newPlaceholderPrincipal(user, "site a.example.com"), "alice"), true},
		{"another site", owner(newPlaceholderPrincipal(user, "site b.example.com"), "alice"), false},
		{"another placeholder", owner(newPlaceholderPrincipal("{http.request.header.X-User}", "site a.example.com"), "alice"), false},
		{"another user", owner(newPlaceholderPrincipal(user, "site a.example.com"), "bob"), false},
	}
	for _, tt := range tests {
		if (tt.key == site1) != tt.same {
			t.Errorf("%s: owner %q vs %q, same = %v, want %v", tt.name, tt.key, site1, tt.key == site1, tt.same)
		}
	}
}

// A trust_domain on a route whose callers are anonymous does nothing, and
// the operator is told so; with auth or principal it is not warned about.
func TestIgnoredTrustDomainWarned(t *testing.T) {
	tests := []struct {
		name string
		h    Handler
		warn bool
	}{
		{"anonymous with trust_domain", Handler{TrustDomain: "team-a"}, true},
		{"anonymous without", Handler{}, false},
		{"principal with trust_domain", Handler{Principal: "{http.auth.user.id}", TrustDomain: "team-a"}, false},
		{"auth with trust_domain", Handler{Auth: &AuthConfig{}, TrustDomain: "team-a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := zapobserver.New(zap.WarnLevel)
			h := tt.h
			h.logger = zap.New(core)
			h.warnIgnoredTrustDomain()
			if got := logs.Len() > 0; got != tt.warn {
				t.Errorf("warned = %v, want %v", got, tt.warn)
			}
		})
	}
}
