package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// AuthConfig says how callers are identified. Tasks are bound to the
// caller's principal; without AuthConfig every caller is one anonymous
// principal.
type AuthConfig struct {
	// JWT verifies a bearer token on every request to the MCP endpoint.
	JWT *JWTConfig `json:"jwt,omitempty"`
}

// JWTConfig verifies bearer JWTs. Exactly one key source is required:
// HMACSecret (with HMACSecrets), PublicKeys or JWKSURL.
type JWTConfig struct {
	// HMACSecret is the shared secret of HS256/384/512 tokens, at least
	// 32 bytes. Placeholders such as {env.MCP_JWT_SECRET} are expanded.
	HMACSecret string `json:"hmac_secret,omitempty"`

	// HMACSecrets are further secrets accepted besides HMACSecret, under
	// the same rules, for rotation: a token signed with any of them is
	// valid. In the Caddyfile, hmac_secret may be repeated.
	HMACSecrets []string `json:"hmac_secrets,omitempty"`

	// PublicKeys are paths of PEM files with RSA, ECDSA or Ed25519 public
	// keys; several may be given for key rotation.
	PublicKeys []string `json:"public_keys,omitempty"`

	// JWKSURL is the address of a JSON Web Key Set, refreshed when a token
	// names an unknown key id.
	JWKSURL string `json:"jwks_url,omitempty"`

	// Issuer, when set, must equal the token's iss claim.
	Issuer string `json:"issuer,omitempty"`

	// Audience must be among the token's aud claim. It is required with
	// public_keys and jwks_url (an identity provider issues tokens for many
	// services), unless AudienceOptional is set; with hmac_secret it is
	// optional.
	Audience string `json:"audience,omitempty"`

	// AudienceOptional accepts tokens whatever their aud when Audience is
	// empty, with a warning at start. Caddyfile: audience_optional.
	AudienceOptional bool `json:"audience_optional,omitempty"`

	// PrincipalClaim names the claim that identifies the principal.
	// Default: "sub".
	PrincipalClaim string `json:"principal_claim,omitempty"`

	// TenantClaim, when set, names the claim that identifies the tenant.
	TenantClaim string `json:"tenant_claim,omitempty"`

	// Leeway is the clock skew allowed on exp and nbf. Default: 30s.
	Leeway caddy.Duration `json:"leeway,omitempty"`

	// ResourceMetadataURL, when set, is advertised in WWW-Authenticate as
	// resource_metadata, for MCP's OAuth protected-resource discovery.
	ResourceMetadataURL string `json:"resource_metadata_url,omitempty"`
}

// parseAuth reads "auth jwt { … }".
func (h *Handler) parseAuth(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	if d.Val() != "jwt" {
		return d.Errf("auth: unknown method %q (want jwt)", d.Val())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	if h.Auth != nil {
		return d.Err("auth is configured twice")
	}
	j := new(JWTConfig)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		name := d.Val()
		var into *string
		switch name {
		case "hmac_secret":
			into = &j.HMACSecret
			if j.HMACSecret != "" { // a second one: rotation
				var secret string
				if !d.AllArgs(&secret) {
					return d.ArgErr()
				}
				j.HMACSecrets = append(j.HMACSecrets, secret)
				continue
			}
		case "public_key":
			var path string
			if !d.AllArgs(&path) {
				return d.ArgErr()
			}
			j.PublicKeys = append(j.PublicKeys, path)
			continue
		case "jwks_url":
			into = &j.JWKSURL
		case "issuer":
			into = &j.Issuer
		case "audience":
			into = &j.Audience
		case "principal_claim":
			into = &j.PrincipalClaim
		case "tenant_claim":
			into = &j.TenantClaim
		case "resource_metadata_url":
			into = &j.ResourceMetadataURL
		case "audience_optional":
			if d.NextArg() {
				return d.ArgErr()
			}
			j.AudienceOptional = true
			continue
		case "leeway":
			if err := parseDuration(d, &j.Leeway); err != nil {
				return err
			}
			continue
		default:
			return d.Errf("auth jwt: unrecognized subdirective %q", name)
		}
		if !d.AllArgs(into) {
			return d.ArgErr()
		}
	}
	sources := 0
	for _, set := range []bool{j.HMACSecret != "", len(j.PublicKeys) > 0, j.JWKSURL != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return d.Errf("auth jwt: want exactly one key source (hmac_secret, public_key or jwks_url), got %d", sources)
	}
	h.Auth = &AuthConfig{JWT: j}
	return nil
}
