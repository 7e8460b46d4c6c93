package auth

import (
	"context"
	"errors"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// During a rotation both HMAC secrets verify; a third does not, and a short
// extra secret is refused at construction.
func TestHMACRotation(t *testing.T) {
	t.Parallel()
	oldSecret := []byte("the-old-secret-of-at-least-32-bytes!!")
	newSecret := []byte("the-new-secret-of-at-least-32-bytes!!")
	other := []byte("somebody-elses-secret-of-32-bytes!!!!")
	o := Options{HMACSecret: oldSecret, HMACSecrets: [][]byte{newSecret}, Issuer: testIssuer, Audience: testAudience}
	v, err := NewVerifier(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		secret []byte
		ok     bool
	}{
		{"old secret", oldSecret, true},
		{"new secret", newSecret, true},
		{"unknown secret", other, false},
	}
	for _, tt := range tests {
		_, err := v.Verify(sign(t, jwt.SigningMethodHS256, tt.secret, claims(), ""))
		if (err == nil) != tt.ok {
			t.Errorf("%s: Verify err = %v, want ok %v", tt.name, err, tt.ok)
		}
		if !tt.ok && !errors.Is(err, ErrInvalidToken) {
			t.Errorf("%s: err %v is not ErrInvalidToken", tt.name, err)
		}
	}
	o.HMACSecrets = [][]byte{[]byte("short")}
	if _, err := NewVerifier(context.Background(), o); err == nil {
		t.Error("a short second secret was accepted")
	}
}
