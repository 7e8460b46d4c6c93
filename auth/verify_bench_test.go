package auth

import (
	"context"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerifyHMAC measures one HS256 verification, principal included:
// the cost every authenticated request pays. A subject holding U+FFFD
// also has its JSON text checked (exactText); others do not.
func BenchmarkVerifyHMAC(b *testing.B) {
	secret := []byte("a-benchmark-hmac-secret-of-32-bytes-or-more")
	v, err := NewVerifier(context.Background(), Options{HMACSecret: secret, TenantClaim: "tenant"})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, sub string }{{"plain", "alice"}, {"replacement character", "alice\ufffd"}} {
		b.Run(bc.name, func(b *testing.B) {
			token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(set("sub", bc.sub))).SignedString(secret)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(token); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
