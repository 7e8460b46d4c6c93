package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

const (
	testIssuer   = "https://issuer.example"
	testAudience = "mcp-gateway"
)

// testKeys are generated once per test binary: RSA generation is slow.
type testKeys struct {
	secret, otherSecret []byte
	rsa, rsa2           *rsa.PrivateKey
	ec                  *ecdsa.PrivateKey
	ed                  ed25519.PrivateKey
	rsaPEM, rsa2PEM     []byte
	ecPEM, edPEM        []byte
}

var (
	keysOnce sync.Once
	keys     testKeys
)

func getKeys(t *testing.T) *testKeys {
	t.Helper()
	keysOnce.Do(func() {
		keys.secret = randBytes(t, 64)
		keys.otherSecret = randBytes(t, 64)
		keys.rsa = must(rsa.GenerateKey(rand.Reader, 2048))
		keys.rsa2 = must(rsa.GenerateKey(rand.Reader, 2048))
		keys.ec = must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader))
		_, keys.ed = must2(ed25519.GenerateKey(rand.Reader))
		keys.rsaPEM = pemPublic(t, &keys.rsa.PublicKey)
		keys.rsa2PEM = pemPublic(t, &keys.rsa2.PublicKey)
		keys.ecPEM = pemPublic(t, &keys.ec.PublicKey)
		keys.edPEM = pemPublic(t, keys.ed.Public())
	})
	return &keys
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func pemPublic(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// claims returns valid claims for the test issuer and audience, changed by
// the given edits.
func claims(edits ...func(jwt.MapClaims)) jwt.MapClaims {
	now := time.Now()
	c := jwt.MapClaims{
		"iss":    testIssuer,
		"aud":    testAudience,
		"sub":    "alice",
		"tenant": "acme",
		"iat":    now.Unix(),
		"exp":    now.Add(5 * time.Minute).Unix(),
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func set(k string, v any) func(jwt.MapClaims) { return func(c jwt.MapClaims) { c[k] = v } }
func del(k string) func(jwt.MapClaims)        { return func(c jwt.MapClaims) { delete(c, k) } }

func sign(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims, kid string) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", m.Alg(), err)
	}
	return s
}

func signWithHeader(t *testing.T, m jwt.SigningMethod, key any, c jwt.MapClaims, name string, value any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	tok.Header[name] = value
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign %s: %v", m.Alg(), err)
	}
	return s
}

func TestVerify(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	strict := func(o Options) Options {
		o.Issuer, o.Audience, o.TenantClaim = testIssuer, testAudience, "tenant"
		return o
	}
	hmac := strict(Options{HMACSecret: k.secret})
	rsaOnly := strict(Options{PublicKeysPEM: [][]byte{k.rsaPEM}})
	rotated := strict(Options{PublicKeysPEM: [][]byte{k.rsaPEM, k.rsa2PEM}})
	mixedDoc := strict(Options{PublicKeysPEM: [][]byte{append(append([]byte("comment\n"), k.ecPEM...), k.edPEM...)}})
	alice := Principal{Issuer: testIssuer, Subject: "alice", Tenant: "acme"}
	past := func(d time.Duration) int64 { return time.Now().Add(-d).Unix() }
	future := func(d time.Duration) int64 { return time.Now().Add(d).Unix() }

	tests := []struct {
		name    string
		opts    Options
		token   string
		want    Principal
		wantErr error  // nil: accepted
		reason  string // substring of the error, when rejected
	}{
		// Accepted with the right key.
		{name: "HS256", opts: hmac, token: sign(t, jwt.SigningMethodHS256, k.secret, claims(), ""), want: alice},
		{name: "HS384", opts: hmac, token: sign(t, jwt.SigningMethodHS384, k.secret, claims(), ""), want: alice},
		{name: "HS512", opts: hmac, token: sign(t, jwt.SigningMethodHS512, k.secret, claims(), ""), want: alice},
		{name: "RS256", opts: rsaOnly, token: sign(t, jwt.SigningMethodRS256, k.rsa, claims(), ""), want: alice},
		{name: "PS256", opts: rsaOnly, token: sign(t, jwt.SigningMethodPS256, k.rsa, claims(), ""), want: alice},
		{name: "ES256", opts: mixedDoc, token: sign(t, jwt.SigningMethodES256, k.ec, claims(), ""), want: alice},
		{name: "EdDSA", opts: mixedDoc, token: sign(t, jwt.SigningMethodEdDSA, k.ed, claims(), ""), want: alice},
		{name: "rotation first key", opts: rotated, token: sign(t, jwt.SigningMethodRS256, k.rsa, claims(), ""), want: alice},
		{name: "rotation second key", opts: rotated, token: sign(t, jwt.SigningMethodRS512, k.rsa2, claims(), ""), want: alice},
		{name: "no iss/aud/tenant configured", opts: Options{HMACSecret: k.secret},
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(del("iss"), del("aud"), del("tenant")), ""),
			want:  Principal{Subject: "alice"}},
		{name: "custom principal claim", opts: Options{HMACSecret: k.secret, PrincipalClaim: "email"},
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("email", "a@example.com")), ""),
			want:  Principal{Issuer: testIssuer, Subject: "a@example.com"}},
		{name: "leeway: expired 10s ago accepted", opts: hmac,
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("exp", past(10*time.Second))), ""), want: alice},
		{name: "aud array containing audience", opts: hmac,
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("aud", []string{"other", testAudience})), ""), want: alice},

		// Rejected.
		{name: "alg none", opts: hmac, wantErr: jwt.ErrTokenSignatureInvalid, reason: "algorithm is not allowed",
			token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(), "")},
		{name: "alg none against public key", opts: rsaOnly, wantErr: jwt.ErrTokenSignatureInvalid, reason: "algorithm is not allowed",
			token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(), "")},
		{name: "HS256 signed with the RSA public key PEM", opts: rsaOnly, wantErr: jwt.ErrTokenSignatureInvalid, reason: "algorithm is not allowed",
			token: sign(t, jwt.SigningMethodHS256, k.rsaPEM, claims(), "")},
		{name: "ES256 token against RSA key", opts: rsaOnly, wantErr: jwt.ErrTokenSignatureInvalid, reason: "algorithm is not allowed",
			token: sign(t, jwt.SigningMethodES256, k.ec, claims(), "")},
		{name: "wrong HMAC secret", opts: hmac, wantErr: jwt.ErrTokenSignatureInvalid, reason: "signature is invalid",
			token: sign(t, jwt.SigningMethodHS256, k.otherSecret, claims(), "")},
		{name: "wrong RSA key", opts: rsaOnly, wantErr: jwt.ErrTokenSignatureInvalid, reason: "signature is invalid",
			token: sign(t, jwt.SigningMethodRS256, k.rsa2, claims(), "")},
		{name: "expired beyond leeway", opts: hmac, wantErr: jwt.ErrTokenExpired, reason: "expired",
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("exp", past(2*time.Minute))), "")},
		{name: "nbf in the future beyond leeway", opts: hmac, wantErr: jwt.ErrTokenNotValidYet, reason: "not valid yet",
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("nbf", future(2*time.Minute))), "")},
		{name: "wrong aud", opts: hmac, wantErr: jwt.ErrTokenInvalidAudience, reason: "audience",
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("aud", "other")), "")},
		{name: "missing aud", opts: hmac, wantErr: jwt.ErrTokenRequiredClaimMissing, reason: "required claim",
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(del("aud")), "")},
		{name: "wrong iss", opts: hmac, wantErr: jwt.ErrTokenInvalidIssuer, reason: "issuer",
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("iss", "https://evil.example")), "")},
		{name: "missing exp", opts: hmac, wantErr: jwt.ErrTokenRequiredClaimMissing, reason: "required claim",
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(del("exp")), "")},
		{name: "malformed: one segment", opts: hmac, wantErr: jwt.ErrTokenMalformed, reason: "malformed", token: "not-a-jwt"},
		{name: "malformed: bad base64", opts: hmac, wantErr: jwt.ErrTokenMalformed, reason: "malformed", token: "a$.b$.c$"},
		{name: "missing principal claim", opts: hmac, wantErr: jwt.ErrTokenRequiredClaimMissing, reason: `principal claim "sub"`,
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(del("sub")), "")},
		{name: "empty principal claim", opts: hmac, wantErr: jwt.ErrTokenRequiredClaimMissing, reason: `principal claim "sub"`,
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("sub", "")), "")},
		{name: "non-string principal claim", opts: Options{HMACSecret: k.secret, PrincipalClaim: "uid"}, wantErr: jwt.ErrTokenRequiredClaimMissing,
			reason: `principal claim "uid"`, token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("uid", 42)), "")},
		{name: "missing tenant claim", opts: hmac, wantErr: jwt.ErrTokenRequiredClaimMissing, reason: `tenant claim "tenant"`,
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(del("tenant")), "")},
		{name: "non-string tenant claim", opts: hmac, wantErr: jwt.ErrTokenRequiredClaimMissing, reason: `tenant claim "tenant"`,
			token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("tenant", []string{"a"})), "")},
		{name: "crit header", opts: hmac, wantErr: jwt.ErrTokenUnverifiable, reason: "critical header",
			token: signWithHeader(t, jwt.SigningMethodHS256, k.secret, claims(), "crit", []string{"exp"})},
		{name: "non-string iss without configured issuer", opts: Options{HMACSecret: k.secret}, wantErr: jwt.ErrInvalidType,
			reason: "iss", token: sign(t, jwt.SigningMethodHS256, k.secret, claims(set("iss", 7)), "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewVerifier(t.Context(), tt.opts)
			if err != nil {
				t.Fatalf("NewVerifier: %v", err)
			}
			got, err := v.Verify(tt.token)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if got.TrustDomain != v.TrustDomain() || got.TrustDomain == "" {
					t.Fatalf("principal's trust domain %q, want the verifier's %q", got.TrustDomain, v.TrustDomain())
				}
				if got.TrustDomain = ""; got != tt.want {
					t.Fatalf("principal = %+v, want %+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify accepted the token, principal %+v", got)
			}
			if !errors.Is(err, ErrInvalidToken) || !errors.Is(err, tt.wantErr) {
				t.Errorf("error %q does not wrap ErrInvalidToken and %v", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not mention %q", err, tt.reason)
			}
			assertNoTokenLeak(t, tt.token, err)
		})
	}
}

// assertNoTokenLeak fails when err or its challenge quotes any token part.
func assertNoTokenLeak(t *testing.T, token string, err error) {
	t.Helper()
	challenge := Challenge(err, "mcp", "")
	for part := range strings.SplitSeq(token, ".") {
		if len(part) < 8 {
			continue
		}
		if strings.Contains(err.Error(), part) || strings.Contains(challenge, part) {
			t.Errorf("error or challenge quotes the token: %q / %q", err, challenge)
		}
	}
}

func TestVerifyEmptyToken(t *testing.T) {
	t.Parallel()
	v, err := NewVerifier(context.Background(), Options{HMACSecret: getKeys(t).secret})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(""); !errors.Is(err, ErrMissingToken) {
		t.Fatalf("Verify(\"\") = %v, want ErrMissingToken", err)
	}
}

func TestNewVerifierRejectsBadOptions(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	weakRSA := must(rsa.GenerateKey(rand.Reader, 1024))
	p224 := must(ecdsa.GenerateKey(elliptic.P224(), rand.Reader))
	privDER := must(x509.MarshalPKCS8PrivateKey(k.ec))
	tests := []struct {
		name   string
		opts   Options
		reason string
	}{
		{"no key source", Options{Issuer: testIssuer}, "exactly one"},
		{"two key sources", Options{HMACSecret: k.secret, JWKSURL: "https://idp.example/jwks"}, "exactly one"},
		{"HMAC secret shorter than 32 bytes", Options{HMACSecret: make([]byte, 31)}, "at least 32"},
		{"HMAC secret is a PEM public key", Options{HMACSecret: k.rsaPEM}, "PEM"},
		{"negative leeway", Options{HMACSecret: k.secret, Leeway: -time.Second}, "leeway"},
		{"PEM without blocks", Options{Audience: testAudience, PublicKeysPEM: [][]byte{[]byte("not pem")}}, "no PEM block"},
		{"PEM private key", Options{Audience: testAudience, PublicKeysPEM: [][]byte{pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER})}}, "private key"},
		{"RSA key below 2048 bits", Options{Audience: testAudience, PublicKeysPEM: [][]byte{pemPublic(t, &weakRSA.PublicKey)}}, "2048"},
		{"ECDSA P-224 key", Options{Audience: testAudience, PublicKeysPEM: [][]byte{pemPublic(t, &p224.PublicKey)}}, "P-256"},
		{"JWKS URL not http(s)", Options{Audience: testAudience, JWKSURL: "ftp://idp.example/jwks"}, "http or https"},
		{"JWKS URL relative", Options{Audience: testAudience, JWKSURL: "/jwks"}, "http or https"},
		{"JWKS negative refresh interval", Options{Audience: testAudience, JWKSURL: "https://idp.example/jwks", JWKSRefreshInterval: -time.Second}, "negative"},
		// The message names the Caddyfile options that fix it.
		{"public key without audience", Options{PublicKeysPEM: [][]byte{k.rsaPEM}}, `"audience <value>"`},
		{"public key without audience, escape", Options{PublicKeysPEM: [][]byte{k.rsaPEM}}, `"audience_optional"`},
		{"JWKS without audience", Options{JWKSURL: "https://idp.example/jwks"}, `"audience <value>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := NewVerifier(t.Context(), tt.opts)
			if err == nil {
				t.Fatalf("NewVerifier accepted the options: %+v", v)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("error %q does not mention %q", err, tt.reason)
			}
		})
	}
}

func TestPrincipalKeyIsUnambiguous(t *testing.T) {
	t.Parallel()
	principals := []Principal{
		{},
		{Subject: "a"},
		{Issuer: "a"},
		{Tenant: "a"},
		{Tenant: "a|b", Issuer: "c", Subject: "d"},
		{Tenant: "a", Issuer: "b|c", Subject: "d"},
		{Tenant: "a", Issuer: "b", Subject: "c|d"},
		{Tenant: "1:a", Issuer: "", Subject: "b"},
		{Tenant: "", Issuer: "1:a", Subject: "b"},
		{Issuer: "https://issuer.example", Subject: "alice"},
		{Issuer: "https://issuer.example/", Subject: "alice"},
	}
	seen := map[string]Principal{}
	for _, p := range principals {
		k := p.Key()
		if q, dup := seen[k]; dup {
			t.Fatalf("%+v and %+v share key %q", p, q, k)
		}
		seen[k] = p
		if p.Key() != k {
			t.Fatalf("Key of %+v is not stable", p)
		}
	}
}

func TestNewVerifierCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewVerifier(ctx, Options{HMACSecret: getKeys(t).secret}); !errors.Is(err, context.Canceled) {
		t.Fatalf("NewVerifier with a cancelled context = %v, want context.Canceled", err)
	}
}

// audience_optional lifts the audience requirement of public keys, with a
// warning in the log.
func TestAudienceOptional(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	core, logs := observer.New(zap.WarnLevel)
	v, err := NewVerifier(context.Background(), Options{PublicKeysPEM: [][]byte{k.rsaPEM}, AudienceOptional: true, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, claims(set("aud", "another-service")), "")); err != nil {
		t.Fatalf("audience_optional refused a token for another audience: %v", err)
	}
	if logs.FilterMessageSnippet("audience_optional").Len() != 1 {
		t.Errorf("no startup warning about audience_optional: %v", logs.All())
	}
}
