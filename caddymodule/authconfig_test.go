package caddymodule

import (
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestAuthAudienceOptional(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_tasks {\nauth jwt {\njwks_url https://idp.example/jwks\naudience_optional\n}\ntrust_domain corp\n}")); err != nil {
		t.Fatal(err)
	}
	if !h.Auth.JWT.AudienceOptional || h.TrustDomain != "corp" {
		t.Errorf("audience_optional %v, trust_domain %q", h.Auth.JWT.AudienceOptional, h.TrustDomain)
	}
	if err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_tasks {\nauth jwt {\naudience_optional yes\n}\n}")); err == nil {
		t.Error("audience_optional with an argument accepted")
	}
}
