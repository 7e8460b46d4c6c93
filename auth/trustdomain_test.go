package auth

import (
	"context"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// The trust domain tells apart verifiers that trust different keys,
// issuers or audiences, and is a pure function of the configuration, so
// owner keys survive restarts and reloads.
func TestTrustDomain(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	base := Options{HMACSecret: k.secret, Issuer: testIssuer, Audience: testAudience}
	with := func(edit func(*Options)) Options { o := base; edit(&o); return o }
	domain := func(o Options) string {
		t.Helper()
		v, err := NewVerifier(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return v.TrustDomain()
	}
	pem := Options{PublicKeysPEM: [][]byte{k.rsaPEM, k.ecPEM}, Audience: testAudience}
	tests := []struct {
		name string
		a, b Options
		same bool
	}{
		{"same configuration", base, base, true},
		{"another HMAC secret", base, with(func(o *Options) { o.HMACSecret = k.otherSecret }), false},
		{"another audience", base, with(func(o *Options) { o.Audience = "other" }), false},
		{"another issuer", base, with(func(o *Options) { o.Issuer = "https://other.example" }), false},
		{"another principal claim", base, with(func(o *Options) { o.PrincipalClaim = "email" }), false},
		{"another tenant claim", base, with(func(o *Options) { o.TenantClaim = "org" }), false},
		{"explicit default principal claim", base, with(func(o *Options) { o.PrincipalClaim = "sub" }), true},
		{"leeway does not matter", base, with(func(o *Options) { o.Leeway = 5e9 }), true},
		{"public keys in another order", pem, Options{PublicKeysPEM: [][]byte{k.ecPEM, k.rsaPEM}, Audience: testAudience}, true},
		{"another public key set", pem, Options{PublicKeysPEM: [][]byte{k.rsaPEM, k.rsa2PEM}, Audience: testAudience}, false},
		{"HMAC and a public key", base, with(func(o *Options) { o.HMACSecret, o.PublicKeysPEM = nil, [][]byte{k.rsaPEM} }), false},
		{"named: secrets rotate freely",
			with(func(o *Options) { o.TrustDomain = "corp" }),
			with(func(o *Options) { o.TrustDomain, o.HMACSecret = "corp", k.otherSecret }), true},
		{"named: the audience still counts",
			with(func(o *Options) { o.TrustDomain = "corp" }),
			with(func(o *Options) { o.TrustDomain, o.Audience = "corp", "other" }), false},
		{"named differently", with(func(o *Options) { o.TrustDomain = "a" }), with(func(o *Options) { o.TrustDomain = "b" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := domain(tt.a), domain(tt.b)
			if (a == b) != tt.same {
				t.Errorf("domains %q and %q: same = %v, want %v", a, b, a == b, tt.same)
			}
		})
	}

	// End to end in the package: one subject, two secrets, two owners.
	v1 := must(NewVerifier(context.Background(), base))
	v2 := must(NewVerifier(context.Background(), with(func(o *Options) { o.HMACSecret = k.otherSecret })))
	p1 := must(v1.Verify(sign(t, jwt.SigningMethodHS256, k.secret, claims(), "")))
	p2 := must(v2.Verify(sign(t, jwt.SigningMethodHS256, k.otherSecret, claims(), "")))
	if p1.Subject != p2.Subject || p1.Key() == p2.Key() {
		t.Errorf("subject %q under two secrets has owner keys %q and %q, want two different keys", p1.Subject, p1.Key(), p2.Key())
	}
}
