package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// jwksServer serves a replaceable JWK Set and counts fetches.
type jwksServer struct {
	*httptest.Server
	body atomic.Pointer[[]byte]
	down atomic.Bool
	hits atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.body.Store(&body)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.hits.Add(1)
		if s.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) serve(body []byte) { s.body.Store(&body) }

// jwk describes one JWK Set entry.
type jwk struct {
	key any
	kid string
	alg jwkset.ALG
	use jwkset.USE
}

func jwksJSON(t *testing.T, keys ...jwk) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		_, symmetric := k.key.([]byte)
		j, err := jwkset.NewJWKFromKey(k.key, jwkset.JWKOptions{
			Marshal:  jwkset.JWKMarshalOptions{Private: symmetric},
			Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: k.use},
		})
		if err != nil {
			t.Fatalf("JWK %s: %v", k.kid, err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jwksOptions(s *jwksServer) Options {
	return Options{
		JWKSURL:                       s.URL + "/jwks.json",
		HTTPClient:                    s.Client(),
		Issuer:                        testIssuer,
		Audience:                      testAudience,
		JWKSUnknownKIDRefreshInterval: time.Nanosecond, // refresh on every unknown kid
		Logger:                        zap.NewNop(),
	}
}

func TestJWKSKeyRotation(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	ecOther, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	setA := jwksJSON(t,
		jwk{key: &k.rsa.PublicKey, kid: "a", alg: jwkset.AlgRS256, use: jwkset.UseSig},
		jwk{key: k.secret, kid: "h", alg: jwkset.AlgHS256},
		jwk{key: &k.rsa2.PublicKey, kid: "e", use: jwkset.UseEnc},
	)
	// Key B carries no "alg": only the key-family check protects it.
	setB := jwksJSON(t, jwk{key: &k.ec.PublicKey, kid: "b"})
	srv := newJWKSServer(t, setA)
	v, err := NewVerifier(t.Context(), jwksOptions(srv))
	if err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name     string
		before   func()
		token    string
		reason   string // rejection reason; empty: accepted
		wantHits int32  // JWKS fetches after the step
	}{
		{name: "kid A accepted", token: sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "a"), wantHits: 1},
		{name: "no kid tries cached keys", token: sign(t, jwt.SigningMethodRS256, k.rsa, claims(), ""), wantHits: 1},
		{name: "HS256 with JWKS oct key refused", token: sign(t, jwt.SigningMethodHS256, k.secret, claims(), "h"), reason: "algorithm is not allowed", wantHits: 1},
		{name: "alg differing from JWK alg refused", token: sign(t, jwt.SigningMethodPS256, k.rsa, claims(), "a"), reason: "no verification key", wantHits: 1},
		{name: "encryption key refused", token: sign(t, jwt.SigningMethodRS256, k.rsa2, claims(), "e"), reason: "no verification key", wantHits: 1},
		{name: "kid B accepted after refresh on unknown kid", before: func() { srv.serve(setB) },
			token: sign(t, jwt.SigningMethodES256, k.ec, claims(), "b"), wantHits: 2},
		{name: "kid B with RSA alg refused by key family", token: sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "b"), reason: "no verification key", wantHits: 2},
		{name: "kid B signed by another key refused", token: sign(t, jwt.SigningMethodES256, ecOther, claims(), "b"), reason: "signature is invalid", wantHits: 2},
		{name: "unknown key refused", token: sign(t, jwt.SigningMethodEdDSA, k.ed, claims(), "c"), reason: "no verification key", wantHits: 3},
		{name: "rotated-out kid A refused", token: sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "a"), reason: "no verification key", wantHits: 4},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		p, err := v.Verify(st.token)
		switch wantErr := st.reason != ""; {
		case wantErr && err == nil:
			t.Errorf("%s: accepted, principal %+v", st.name, p)
		case wantErr && (!errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), st.reason)):
			t.Errorf("%s: error %v does not wrap ErrInvalidToken with reason %q", st.name, err, st.reason)
		case !wantErr && err != nil:
			t.Errorf("%s: %v", st.name, err)
		case !wantErr && p.Subject != "alice":
			t.Errorf("%s: principal %+v", st.name, p)
		}
		if err != nil {
			assertNoTokenLeak(t, st.token, err)
		}
		if got := srv.hits.Load(); got != st.wantHits {
			t.Errorf("%s: %d JWKS fetches, want %d", st.name, got, st.wantHits)
		}
	}
}

func TestJWKSDownAtStart(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	srv := newJWKSServer(t, jwksJSON(t, jwk{key: &k.rsa.PublicKey, kid: "a", use: jwkset.UseSig}))
	srv.down.Store(true)
	v, err := NewVerifier(t.Context(), jwksOptions(srv))
	if err != nil {
		t.Fatalf("NewVerifier with the JWKS endpoint down: %v", err)
	}
	tok := sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "a")
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify while the JWKS is down = %v, want ErrInvalidToken", err)
	}
	srv.down.Store(false)
	if _, err := v.Verify(tok); err != nil {
		t.Fatalf("Verify after the JWKS came back: %v", err)
	}
	if got := srv.hits.Load(); got != 3 {
		t.Fatalf("%d JWKS fetches, want 3 (start, two unknown-kid refreshes)", got)
	}
}

func TestJWKSContextStopsRefresh(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	srv := newJWKSServer(t, jwksJSON(t, jwk{key: &k.rsa.PublicKey, kid: "a"}))
	ctx, cancel := context.WithCancel(t.Context())
	v, err := NewVerifier(ctx, jwksOptions(srv))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	srv.serve(jwksJSON(t, jwk{key: &k.ec.PublicKey, kid: "b"}))
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "a")); err != nil {
		t.Fatalf("cached key after cancel: %v", err)
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodES256, k.ec, claims(), "b")); err == nil {
		t.Fatal("new kid accepted although ctx was cancelled")
	}
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("%d JWKS fetches after cancel, want 1", got)
	}
}

func TestJWKSUnknownKIDRefreshIsRateLimited(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	srv := newJWKSServer(t, jwksJSON(t, jwk{key: &k.rsa.PublicKey, kid: "a"}))
	opts := jwksOptions(srv)
	opts.JWKSUnknownKIDRefreshInterval = time.Hour
	v, err := NewVerifier(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, kid := range []string{"x", "y", "z"} {
		start := time.Now()
		if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, claims(), kid)); err == nil {
			t.Fatalf("unknown kid %s accepted", kid)
		}
		if d := time.Since(start); d >= JWKSFetchTimeout {
			t.Fatalf("unknown kid %s blocked for %v", kid, d)
		}
		// Only the first unknown kid may refresh; later ones fail at once.
		if got, want := srv.hits.Load(), int32(min(i+2, 2)); got != want {
			t.Fatalf("after kid %s: %d JWKS fetches, want %d", kid, got, want)
		}
	}
	if _, err := v.Verify(sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "a")); err != nil {
		t.Fatalf("known kid after rate-limited refreshes: %v", err)
	}
}

// After an outage of the JWKS endpoint at start, with the default refresh
// settings, a valid token is accepted within seconds of the endpoint coming
// back (not after minutes), and the failed fetches are logged at warn level.
func TestJWKSRecoversSoonAfterOutageAtStart(t *testing.T) {
	t.Parallel()
	k := getKeys(t)
	srv := newJWKSServer(t, jwksJSON(t, jwk{key: &k.rsa.PublicKey, kid: "a", use: jwkset.UseSig}))
	srv.down.Store(true)
	core, logs := observer.New(zap.WarnLevel)
	opts := jwksOptions(srv)
	opts.JWKSUnknownKIDRefreshInterval = 0 // the defaults are under test
	opts.Logger = zap.New(core)
	v, err := NewVerifier(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, jwt.SigningMethodRS256, k.rsa, claims(), "a")
	if _, err := v.Verify(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("Verify while the JWKS is down = %v, want ErrInvalidToken", err)
	}
	if n := logs.FilterMessageSnippet("JWKS fetch failed").Len(); n < 2 {
		t.Errorf("%d warnings about failed JWKS fetches, want one for the start and one for the refresh: %v", n, logs.All())
	}
	srv.down.Store(false)
	// The default backoff is seconds: well within this generous deadline,
	// which the former 5-minute limit could never meet.
	deadline := time.Now().Add(45 * time.Second)
	for {
		_, err := v.Verify(tok)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("valid token still refused 45s after the JWKS came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
