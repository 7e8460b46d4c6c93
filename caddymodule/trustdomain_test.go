package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
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
