package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"testing"
	"time"
)

// signRaw signs payload, byte for byte, as the claims of an HS256 token:
// jwt.MapClaims cannot carry a lone surrogate escape or an invalid UTF-8
// byte, since encoding/json replaces them when marshalling.
func signRaw(secret []byte, payload string) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// Owner keys come from the claims exactly as the token spells them: a
// principal, tenant or issuer claim whose JSON string holds invalid UTF-8
// or an unpaired surrogate escape is refused, because encoding/json would
// decode each of those to U+FFFD, and "victim\udc80" would then be the
// same owner as the legitimate "victim\ufffd". Claims of other JSON types
// are refused, never stringified.
func TestVerifyClaimsAreExact(t *testing.T) {
	t.Parallel()
	secret := getKeys(t).secret
	v, err := NewVerifier(context.Background(), Options{HMACSecret: secret, TenantClaim: "org"})
	if err != nil {
		t.Fatal(err)
	}
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	// payload builds claims with the given raw JSON values (nil: absent).
	payload := func(sub, org, iss string) string {
		p := `{"exp":` + exp + `,"sub":` + sub + `,"org":` + org
		if iss != "" {
			p += `,"iss":` + iss
		}
		return p + `}`
	}
	for _, tc := range []struct {
		name          string
		sub, org, iss string
		want          Principal // zero: refused
	}{
		{name: "plain", sub: `"victim"`, org: `"t1"`, want: Principal{Subject: "victim", Tenant: "t1"}},
		{name: "escaped plain letters", sub: `"vict\u0069m"`, org: `"t1"`, want: Principal{Subject: "victim", Tenant: "t1"}},
		{name: "literal U+FFFD escaped", sub: `"victim\ufffd"`, org: `"t1"`, want: Principal{Subject: "victim\uFFFD", Tenant: "t1"}},
		{name: "literal U+FFFD as UTF-8", sub: "\"victim\xef\xbf\xbd\"", org: `"t1"`, want: Principal{Subject: "victim\uFFFD", Tenant: "t1"}},
		{name: "surrogate pair", sub: `"victim\ud83d\ude00"`, org: `"t1"`, want: Principal{Subject: "victim\U0001F600", Tenant: "t1"}},
		{name: "surrogate pair upper-case hex", sub: `"victim\uD83D\uDE00"`, org: `"t1"`, want: Principal{Subject: "victim\U0001F600", Tenant: "t1"}},
		{name: "escaped backslash before u", sub: `"victim\\udc80"`, org: `"t1"`, want: Principal{Subject: `victim\udc80`, Tenant: "t1"}},
		{name: "issuer", sub: `"victim"`, org: `"t1"`, iss: `"https://idp.example"`, want: Principal{Issuer: "https://idp.example", Subject: "victim", Tenant: "t1"}},

		{name: "lone low surrogate", sub: `"victim\udc80"`, org: `"t1"`},
		{name: "lone high surrogate at the end", sub: `"victim\ud800"`, org: `"t1"`},
		{name: "high surrogate before a letter", sub: `"victim\ud800x"`, org: `"t1"`},
		{name: "high surrogate before a non-surrogate escape", sub: `"victim\ud800\u0041"`, org: `"t1"`},
		{name: "two high surrogates", sub: `"victim\ud800\ud800"`, org: `"t1"`},
		{name: "reversed pair", sub: `"victim\ude00\ud83d"`, org: `"t1"`},
		{name: "raw 0xFF byte", sub: "\"victim\xff\"", org: `"t1"`},
		{name: "truncated UTF-8", sub: "\"victim\xe2\x82\"", org: `"t1"`},
		{name: "overlong UTF-8", sub: "\"victim\xc0\xaf\"", org: `"t1"`},
		{name: "surrogate encoded in UTF-8", sub: "\"victim\xed\xb2\x80\"", org: `"t1"`},
		{name: "number subject", sub: `42`, org: `"t1"`},
		{name: "object subject", sub: `{"id":"victim"}`, org: `"t1"`},
		{name: "array subject", sub: `["victim"]`, org: `"t1"`},
		{name: "boolean subject", sub: `true`, org: `"t1"`},
		{name: "null subject", sub: `null`, org: `"t1"`},
		{name: "empty subject", sub: `""`, org: `"t1"`},
		{name: "tenant lone surrogate", sub: `"victim"`, org: `"t1\udc80"`},
		{name: "tenant raw 0xFF byte", sub: `"victim"`, org: "\"t1\xff\""},
		{name: "tenant number", sub: `"victim"`, org: `1`},
		{name: "issuer lone surrogate", sub: `"victim"`, org: `"t1"`, iss: `"https://idp\ud800"`},
		{name: "issuer raw 0xFF byte", sub: `"victim"`, org: `"t1"`, iss: "\"https://idp\xff\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			token := signRaw(secret, payload(tc.sub, tc.org, tc.iss))
			p, err := v.Verify(token)
			if tc.want == (Principal{}) {
				if err == nil {
					t.Fatalf("accepted as %+q, want refused", p.Subject)
				}
				if !errors.Is(err, ErrInvalidToken) {
					t.Errorf("error %v does not wrap ErrInvalidToken", err)
				}
				assertNoTokenLeak(t, token, err)
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			tc.want.TrustDomain = v.TrustDomain()
			if p != tc.want {
				t.Errorf("principal = %+q, want %+q", p, tc.want)
			}
		})
	}
}

// A custom principal claim follows the same rule as "sub".
func TestVerifyCustomPrincipalClaimIsExact(t *testing.T) {
	t.Parallel()
	secret := getKeys(t).secret
	v, err := NewVerifier(context.Background(), Options{HMACSecret: secret, PrincipalClaim: "email"})
	if err != nil {
		t.Fatal(err)
	}
	exp := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	for _, tc := range []struct {
		email string
		ok    bool
	}{
		{`"victim@example.com"`, true},
		{`"victim@example.com\udc80"`, false},
		{"\"victim@example.com\xff\"", false},
	} {
		_, err := v.Verify(signRaw(secret, `{"exp":`+exp+`,"sub":"other","email":`+tc.email+`}`))
		if (err == nil) != tc.ok {
			t.Errorf("email %+q: err = %v, want accepted %v", tc.email, err, tc.ok)
		}
	}
}
