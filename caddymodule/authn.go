package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/auth"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// authRealm names the protected resource in WWW-Authenticate.
const authRealm = "mcp"

// userIDPlaceholder is the placeholder authenticator publishes the
// caller's subject in, as Caddy's own authentication handler does.
const userIDPlaceholder = "http.auth.user.id"

// identityPlaceholders are every placeholder authenticator sets.
var identityPlaceholders = [...]string{userIDPlaceholder}

// withoutIdentity publishes "no caller" in the placeholders authenticator
// would set, for a request that passes without authentication (a CORS
// preflight). Unset, Caddy leaves a placeholder's text in place: header_up
// X-User {http.auth.user.id} would send the upstream that literal, or keep
// an X-User the client chose. Set to "", it expands to nothing.
func withoutIdentity(r *http.Request) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		for _, name := range identityPlaceholders {
			repl.Set(name, "")
		}
	}
}

// authenticator identifies the caller of each request.
type authenticator struct {
	verifier            *auth.Verifier
	resourceMetadataURL string
}

// newAuthenticator builds the verifier once per configuration. ctx is the
// configuration's context: it stops JWKS refreshes when the config unloads.
// trustDomain, when set, names the verifier's trust domain in place of its
// keys (see auth.Options.TrustDomain).
func newAuthenticator(ctx context.Context, j *JWTConfig, trustDomain string, logger *zap.Logger) (*authenticator, error) {
	repl := caddy.NewReplacer()
	o := auth.Options{
		JWKSURL:          repl.ReplaceKnown(j.JWKSURL, ""),
		Issuer:           repl.ReplaceKnown(j.Issuer, ""),
		Audience:         repl.ReplaceKnown(j.Audience, ""),
		AudienceOptional: j.AudienceOptional,
		TrustDomain:      trustDomain,
		PrincipalClaim:   j.PrincipalClaim,
		TenantClaim:      j.TenantClaim,
		Leeway:           time.Duration(j.Leeway),
		Logger:           logger,
	}
	secrets := j.HMACSecrets // several: a rotation
	if j.HMACSecret != "" {
		secrets = append([]string{j.HMACSecret}, secrets...)
	}
	for i, raw := range secrets {
		secret := repl.ReplaceKnown(raw, "")
		if secret == "" {
			return nil, fmt.Errorf("auth jwt: hmac_secret %q expands to nothing", raw)
		}
		if i == 0 {
			o.HMACSecret = []byte(secret)
		} else {
			o.HMACSecrets = append(o.HMACSecrets, []byte(secret))
		}
	}
	for _, path := range j.PublicKeys {
		path = repl.ReplaceKnown(path, "")
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("auth jwt: reading public_key %s: %w", path, err)
		}
		o.PublicKeysPEM = append(o.PublicKeysPEM, pem)
	}
	v, err := auth.NewVerifier(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("auth jwt: %w", err)
	}
	// Operators compare it across reloads: a change orphans every task.
	logger.Info("auth jwt: trust domain of owner keys", zap.String("trust_domain", v.TrustDomain()))
	return &authenticator{verifier: v, resourceMetadataURL: repl.ReplaceKnown(j.ResourceMetadataURL, "")}, nil
}

func (a *authenticator) trustDomain() string { return a.verifier.TrustDomain() }

// authenticate verifies the bearer token of r. On success it returns r
// carrying the principal as its task owner, and publishes the subject as
// {http.auth.user.id} for access logs. On failure it writes 401 and returns
// nil. The token is read from the Authorization header only, so the body
// stays untouched, and it is never logged or echoed.
func (a *authenticator) authenticate(w http.ResponseWriter, r *http.Request) *http.Request {
	token, present, err := auth.BearerToken(r)
	if err == nil && !present {
		err = auth.ErrMissingToken
	}
	var p auth.Principal
	if err == nil {
		p, err = a.verifier.Verify(token)
	}
	if err != nil {
		w.Header().Set("WWW-Authenticate", auth.Challenge(err, authRealm, a.resourceMetadataURL))
		msg := "Unauthorized: a valid bearer token is required"
		if !errors.Is(err, auth.ErrMissingToken) {
			msg = "Unauthorized: invalid bearer token"
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(jsonrpc.ErrorBytes(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "%s", msg)))
		return nil
	}
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set(userIDPlaceholder, p.Subject)
	}
	return taskproxy.WithCaller(r, task.Caller{Owner: p.Key(), Principal: p.Subject, Tenant: p.Tenant})
}

// placeholderPrincipal trusts an earlier Caddy handler (forward_auth,
// caddy-security, basic_auth) to have authenticated the request and names
// the principal with a placeholder such as {http.auth.user.id}. A request for
// which it expands to nothing is refused.
type placeholderPrincipal struct {
	placeholder string
	// domain is the trust domain of owner keys (newPlaceholderPrincipal).
	domain string
}

// newPlaceholderPrincipal names the trust domain of the placeholder's
// principals after trustDomain (the handler's trust_domain; the Caddyfile
// adapter fills in the site's addresses) and the placeholder itself, so the
// same user name vouched for by two routes' authentication is two owners,
// and the same configuration always gives the same owner keys.
func newPlaceholderPrincipal(placeholder, trustDomain string) placeholderPrincipal {
	h := sha256.New()
	for _, f := range []string{"pd1", trustDomain, placeholder} {
		h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	return placeholderPrincipal{placeholder: placeholder, domain: "principal:" + hex.EncodeToString(h.Sum(nil)[:16])}
}

func (p placeholderPrincipal) trustDomain() string { return p.domain }

// authenticate takes the principal from the placeholder. A name that is not
// valid UTF-8 is refused like an empty one: owner keys are stored as JSON
// text, where each invalid byte becomes U+FFFD, so "victim" followed by a
// 0xFF byte would be stored as, and read back for, "victim\ufffd".
func (p placeholderPrincipal) authenticate(w http.ResponseWriter, r *http.Request) *http.Request {
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	var who string
	if repl != nil {
		who = repl.ReplaceKnown(p.placeholder, "")
	}
	switch {
	case who == "":
		refusePrincipal(w, "Unauthorized: no authenticated principal")
		return nil
	case !utf8.ValidString(who):
		refusePrincipal(w, "Unauthorized: the authenticated principal is not valid UTF-8")
		return nil
	}
	owner := auth.Principal{TrustDomain: p.domain, Subject: who}.Key()
	return taskproxy.WithCaller(r, task.Caller{Owner: owner, Principal: who})
}

// refusePrincipal answers 401 for a request whose placeholder names no
// acceptable principal. There is no WWW-Authenticate: the handler that
// authenticates the route, not this one, knows the scheme to challenge.
func refusePrincipal(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(jsonrpc.ErrorBytes(nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "%s", msg)))
}
