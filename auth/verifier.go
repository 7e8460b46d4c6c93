// Package auth verifies JWT bearer tokens for the MCP gateway and turns
// them into a [Principal] that owns tasks.
//
// The package is independent of Caddy: the gateway module builds a
// [Verifier] from its configuration with [NewVerifier], extracts the token
// with [BearerToken], checks it with [Verifier.Verify] and, on failure,
// answers 401 with the WWW-Authenticate value built by [Challenge].
//
// Security properties enforced for every token:
//
//   - The accepted signing algorithms are pinned to the configured key type
//     (HMAC secret: HS256/384/512; RSA: RS*/PS*; ECDSA: the ES algorithm of
//     the key's curve; Ed25519: EdDSA; JWKS: asymmetric algorithms only), so
//     "alg": "none" never passes and a public key can never be used as an
//     HMAC secret.
//   - The key used for a token always belongs to the family of the token's
//     algorithm (an RSA key is never offered for ES256, and so on).
//   - "exp" is required; "exp" and "nbf" are checked with a leeway.
//   - "iss" and "aud" are checked when configured.
//   - The claims that name the principal (issuer, principal claim, tenant
//     claim) are taken exactly as the signed payload spells them: a value
//     that is not a JSON string, or a string holding invalid UTF-8 or an
//     unpaired surrogate escape such as "\udc80" (which decoding would turn
//     into U+FFFD, the name of another principal), is refused.
//   - Error messages describe the failure and never contain token contents.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
)

// Defaults and limits applied by [NewVerifier].
const (
	// DefaultPrincipalClaim is the claim naming the principal when
	// Options.PrincipalClaim is empty.
	DefaultPrincipalClaim = "sub"
	// DefaultLeeway is the clock skew tolerated on "exp" and "nbf" when
	// Options.Leeway is zero.
	DefaultLeeway = 30 * time.Second
	// JWKSFetchTimeout bounds every JWKS fetch (initial, periodic and
	// unknown-kid refresh, the latter including the wait for its rate
	// limiter) through the fetch's context, whatever Options.HTTPClient is.
	// It is also the timeout of the default HTTP client.
	JWKSFetchTimeout = 5 * time.Second
	// DefaultJWKSRefreshInterval is how often the JWKS is fetched in the
	// background when Options.JWKSRefreshInterval is zero.
	DefaultJWKSRefreshInterval = time.Hour
	// DefaultJWKSUnknownKIDRefreshInterval is the minimum time between two
	// JWKS fetches triggered by tokens naming an unknown "kid" when
	// Options.JWKSUnknownKIDRefreshInterval is zero. It is short so that
	// keys become usable within seconds after an IdP outage or a key
	// rotation; failed fetches stretch it (see
	// DefaultJWKSRefreshBackoffMax).
	DefaultJWKSUnknownKIDRefreshInterval = time.Second
	// DefaultJWKSRefreshBackoffMax caps the spacing of unknown-kid fetches
	// while the JWKS endpoint keeps failing (it doubles on each failure)
	// when Options.JWKSRefreshBackoffMax is zero.
	DefaultJWKSRefreshBackoffMax = 30 * time.Second
	// MinHMACSecretLen is the shortest HMAC secret NewVerifier accepts.
	MinHMACSecretLen = 32
	// maxTokenLen caps the size of a token handed to the JWT parser.
	maxTokenLen = 64 << 10
)

// Options configures a [Verifier]. Exactly one key source among
// HMACSecret, PublicKeysPEM and JWKSURL must be set.
type Options struct {
	// HMACSecret is the shared secret of HS256/HS384/HS512 tokens. It must
	// be at least MinHMACSecretLen bytes and must not be a PEM document
	// (a public key used as an HMAC secret would let anyone forge tokens).
	HMACSecret []byte

	// HMACSecrets are further secrets accepted besides HMACSecret, each
	// under the same rules, for rotation: a token verified by any is valid.
	HMACSecrets [][]byte

	// PublicKeysPEM holds one or more PEM documents, each with one or more
	// "PUBLIC KEY", "RSA PUBLIC KEY" or "CERTIFICATE" blocks. RSA keys
	// (at least 2048 bits) accept RS256/384/512 and PS256/384/512, ECDSA
	// keys the ES algorithm of their curve (P-256: ES256, P-384: ES384,
	// P-521: ES512) and Ed25519 keys EdDSA. With several keys (rotation) a
	// token is accepted when any key of its algorithm's family verifies it.
	// Private keys are refused. Certificates only carry the key: their
	// validity and chain are not checked.
	PublicKeysPEM [][]byte

	// JWKSURL is the http(s) address of a JSON Web Key Set. Keys are fetched
	// by NewVerifier, refreshed every JWKSRefreshInterval, and refreshed on
	// demand when a token names an unknown "kid" (at most once per
	// JWKSUnknownKIDRefreshInterval). Only keys whose "use" is "sig" or
	// absent are used, and only with asymmetric algorithms.
	JWKSURL string

	// Issuer, when non-empty, must equal the token's "iss" claim.
	Issuer string

	// Audience must be among the token's "aud" claim. It is required with
	// PublicKeysPEM and JWKSURL (an IdP signs tokens for many services, and
	// a token meant for another one must not open this gateway) unless
	// AudienceOptional is set. With an HMACSecret, the secret is shared
	// with this gateway only, so the audience stays optional.
	Audience string

	// AudienceOptional accepts tokens whatever their "aud" when Audience is
	// empty. NewVerifier logs a warning when it takes effect.
	AudienceOptional bool

	// TrustDomain names the trust domain of this verifier in owner keys
	// (see [Verifier.TrustDomain]) instead of its key material, so that
	// keys can be rotated (secrets or public keys added or removed)
	// without changing any principal's owner key. Issuer, Audience and the
	// claim names still count. Empty: the key material names it.
	TrustDomain string

	// PrincipalClaim names the claim identifying the principal; it must be a
	// non-empty string in every token. A number or any other JSON type is
	// refused, not stringified, and so is a string with invalid UTF-8 or
	// an unpaired surrogate escape (see [Verifier.Verify]).
	// Default: DefaultPrincipalClaim.
	PrincipalClaim string

	// TenantClaim, when non-empty, names the claim identifying the tenant.
	// It is then required: a token without it, or with a non-string or
	// empty value, is rejected, so that a tenant-scoped deployment never
	// files a principal under the empty tenant. Its value must be exact
	// text as PrincipalClaim's must.
	TenantClaim string

	// Leeway is the clock skew tolerated on "exp" and "nbf". Zero means
	// DefaultLeeway; negative values are refused.
	Leeway time.Duration

	// HTTPClient fetches the JWKS. Default: a client with a
	// JWKSFetchTimeout timeout. Each fetch is bounded by JWKSFetchTimeout
	// through its context in any case.
	HTTPClient *http.Client

	// JWKSRefreshInterval is the period of the background JWKS refresh.
	// Default: DefaultJWKSRefreshInterval.
	JWKSRefreshInterval time.Duration

	// JWKSUnknownKIDRefreshInterval is the minimum time between two JWKS
	// fetches triggered by unknown key ids. Default:
	// DefaultJWKSUnknownKIDRefreshInterval.
	JWKSUnknownKIDRefreshInterval time.Duration

	// JWKSRefreshBackoffMax caps the time between two unknown-kid fetches
	// while fetches fail: each failure doubles the spacing, from
	// JWKSUnknownKIDRefreshInterval up to this. Default:
	// DefaultJWKSRefreshBackoffMax.
	JWKSRefreshBackoffMax time.Duration

	// Logger receives JWKS fetch failures at warn level (URL and error,
	// never tokens) and configuration warnings. Default: none.
	Logger *zap.Logger
}

// Principal is the authenticated caller extracted from a verified token.
type Principal struct {
	// TrustDomain identifies the configuration that authenticated the
	// caller ([Verifier.TrustDomain]): the same subject under two trust
	// domains is two principals.
	TrustDomain string
	// Issuer is the token's "iss" claim, empty when absent.
	Issuer string
	// Subject is the value of the configured principal claim.
	Subject string
	// Tenant is the value of the configured tenant claim, empty when no
	// tenant claim is configured.
	Tenant string
}

// Key returns an opaque owner key for p: trust domain, tenant, issuer and
// subject. Every field is length-prefixed, so two distinct principals never
// share a key whatever bytes their fields hold. The format is stable and
// may be persisted.
func (p Principal) Key() string {
	var b strings.Builder
	b.Grow(len(p.TrustDomain) + len(p.Tenant) + len(p.Issuer) + len(p.Subject) + 24)
	b.WriteString("p2")
	for _, s := range [...]string{p.TrustDomain, p.Tenant, p.Issuer, p.Subject} {
		b.WriteByte('|')
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	return b.String()
}

// Verifier checks bearer JWTs against one configured key source. It is safe
// for concurrent use.
type Verifier struct {
	parser         *jwt.Parser
	keyfunc        jwt.Keyfunc
	principalClaim string
	tenantClaim    string
	trustDomain    string
}

// TrustDomain returns the stable identity of the verifier's configuration
// that every Principal it returns carries: a digest of the key source (the
// HMAC secret, the public keys or the JWKS URL; or Options.TrustDomain in
// their place), the issuer, the audience and the claim names. It depends on
// the configuration only, so it survives restarts and reloads, and two
// verifiers that trust different keys or audiences never share it.
func (v *Verifier) TrustDomain() string { return v.trustDomain }

// NewVerifier validates o and builds a Verifier. Exactly one key source
// among o.HMACSecret, o.PublicKeysPEM and o.JWKSURL must be set.
//
// For a JWKS, ctx bounds the background refresh: cancelling it stops the
// refresh goroutine and on-demand refreshes, while keys already fetched keep
// verifying tokens. NewVerifier fetches the JWKS once (for at most
// JWKSFetchTimeout) but does not fail when the endpoint is down: the
// failure is logged, tokens are rejected until keys are known, and the next
// token naming a key id triggers a refresh (rate-limited by
// JWKSUnknownKIDRefreshInterval), as does the periodic refresh.
func NewVerifier(ctx context.Context, o Options) (*Verifier, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	sources := 0
	for _, set := range []bool{len(o.HMACSecret) > 0, len(o.PublicKeysPEM) > 0, o.JWKSURL != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, fmt.Errorf("auth: exactly one of HMACSecret, PublicKeysPEM and JWKSURL must be set, got %d", sources)
	}
	if o.Audience == "" && len(o.HMACSecret) == 0 && !o.AudienceOptional {
		return nil, errors.New(`auth: an audience is required with public_key and jwks_url: set "audience <value>" ` +
			`(the aud this gateway's tokens carry), or "audience_optional" to accept tokens issued for any audience`)
	}
	leeway := o.Leeway
	switch {
	case leeway < 0:
		return nil, fmt.Errorf("auth: negative leeway %v", leeway)
	case leeway == 0:
		leeway = DefaultLeeway
	}

	var (
		ks  keySource
		err error
	)
	if o.Audience == "" && o.AudienceOptional && o.Logger != nil {
		o.Logger.Warn("auth: audience_optional: tokens are accepted whatever their audience, including tokens the identity provider issued for other services")
	}
	switch {
	case len(o.HMACSecret) > 0:
		ks, err = newHMACSource(append([][]byte{o.HMACSecret}, o.HMACSecrets...)...)
	case len(o.PublicKeysPEM) > 0:
		ks, err = newPEMSource(o.PublicKeysPEM)
	default:
		ks, err = newJWKSSource(ctx, o)
	}
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}

	popts := []jwt.ParserOption{
		jwt.WithValidMethods(ks.methods),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(leeway),
	}
	if o.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		popts = append(popts, jwt.WithAudience(o.Audience))
	}
	principalClaim := o.PrincipalClaim
	if principalClaim == "" {
		principalClaim = DefaultPrincipalClaim
	}
	return &Verifier{
		parser:         jwt.NewParser(popts...),
		keyfunc:        ks.keyfunc,
		principalClaim: principalClaim,
		tenantClaim:    o.TenantClaim,
		trustDomain:    trustDomain(o, ks.identity, principalClaim),
	}, nil
}

// Verify checks token's signature and claims and returns its principal.
// An empty token yields an error wrapping [ErrMissingToken]; every other
// failure wraps [ErrInvalidToken] (and, where one applies, the matching
// jwt/v5 sentinel such as jwt.ErrTokenExpired) with a reason that never
// quotes the token.
//
// The principal's fields must have decoded exactly from the payload's JSON
// text: "iss", the principal claim and the tenant claim must be strings
// that decode without loss, valid UTF-8 with every surrogate escape in a
// pair. Otherwise "victim\udc80", "victim\ud800" and "victim"
// with a raw 0xFF byte would all decode to "victim\ufffd" and be one owner
// with each other and with a genuine "victim\ufffd". A genuine U+FFFD is
// accepted: it is valid text, and with the lossy spellings refused it
// names one principal only.
func (v *Verifier) Verify(token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrMissingToken
	}
	if len(token) > maxTokenLen {
		return Principal{}, invalid("token is too large", nil)
	}
	keyfuncCalled, critical := false, false
	kf := func(t *jwt.Token) (any, error) {
		keyfuncCalled = true
		// RFC 7515 section 4.1.11: no extension is understood here, so a
		// token marking any header parameter critical must be rejected.
		if _, critical = t.Header["crit"]; critical {
			return nil, errors.New("critical header parameters are not supported")
		}
		return v.keyfunc(t)
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, kf); err != nil {
		if critical {
			return Principal{}, invalid("token has unsupported critical header parameters", jwt.ErrTokenUnverifiable)
		}
		return Principal{}, classify(err, keyfuncCalled)
	}
	return v.principal(token, claims)
}

var (
	// ErrMissingToken reports a request without a bearer token (no
	// Authorization header, or one of another scheme). [Challenge] answers
	// it without an error code, as RFC 6750 section 3.1 asks.
	ErrMissingToken = errors.New("missing bearer token")
	// ErrInvalidToken is wrapped by every error reporting a present but
	// unacceptable token, with the reason in the message.
	ErrInvalidToken = errors.New("invalid token")
)

// tokenError is an invalid-token failure. Its message is the fixed reason
// only; it unwraps to ErrInvalidToken and, when set, a jwt/v5 sentinel
// (never to an error that could quote token contents).
type tokenError struct {
	reason string
	cause  error
}

func invalid(reason string, cause error) error {
	return &tokenError{reason: reason, cause: cause}
}

func (e *tokenError) Error() string { return ErrInvalidToken.Error() + ": " + e.reason }

func (e *tokenError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrInvalidToken}
	}
	return []error{ErrInvalidToken, e.cause}
}

// classify maps a jwt/v5 parse error to a tokenError. keyfuncCalled tells
// whether the algorithm passed the allow-list (the keyfunc only runs then).
func classify(err error, keyfuncCalled bool) error {
	type rule struct {
		sentinel error
		reason   string
	}
	if !keyfuncCalled {
		switch {
		case errors.Is(err, jwt.ErrTokenMalformed):
			return invalid("token is malformed", jwt.ErrTokenMalformed)
		case errors.Is(err, jwt.ErrTokenUnverifiable):
			return invalid("token signing algorithm is missing or unsupported", jwt.ErrTokenUnverifiable)
		case errors.Is(err, jwt.ErrTokenSignatureInvalid):
			return invalid("token signing algorithm is not allowed", jwt.ErrTokenSignatureInvalid)
		}
	}
	for _, r := range []rule{
		{jwt.ErrTokenMalformed, "token is malformed"},
		{jwt.ErrTokenUnverifiable, "no verification key matches the token"},
		{jwt.ErrTokenSignatureInvalid, "token signature is invalid"},
		{jwt.ErrTokenExpired, "token is expired"},
		{jwt.ErrTokenNotValidYet, "token is not valid yet"},
		{jwt.ErrTokenUsedBeforeIssued, "token is used before it was issued"},
		{jwt.ErrTokenInvalidAudience, "token audience is not accepted"},
		{jwt.ErrTokenInvalidIssuer, "token issuer is not accepted"},
		{jwt.ErrTokenRequiredClaimMissing, "token is missing a required claim"},
		{jwt.ErrInvalidType, "token has a claim of the wrong type"},
	} {
		if errors.Is(err, r.sentinel) {
			return invalid(r.reason, r.sentinel)
		}
	}
	return invalid("token is not acceptable", nil)
}
