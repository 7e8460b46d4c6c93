package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// fuzzSecret signs the fuzzed tokens; it is a test constant.
var fuzzSecret = []byte("fuzz-secret-0123456789abcdef-0123456789abcdef")

var fuzzAlgs = []struct {
	name string
	hash func() hash.Hash
}{{"HS256", sha256.New}, {"HS384", sha512.New384}, {"HS512", sha512.New}}

// signFuzz signs header and payload, byte for byte, with fuzzSecret.
func signFuzz(alg int, header, payload []byte) string {
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	mac := hmac.New(fuzzAlgs[alg].hash, fuzzSecret)
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// bearerRE is RFC 6750's credentials syntax as BearerToken documents it:
// the scheme in any case, one or more spaces, a b64token; surrounding
// spaces and tabs are ignored.
var bearerRE = regexp.MustCompile(`^[ \t]*(?i:bearer) +([A-Za-z0-9\-._~+/]+=*)[ \t]*$`)

// exactJSONString is the reference for a claim that decodes without loss:
// a JSON string of valid UTF-8 whose \u escapes of surrogate halves all
// pair up, high then low. It decodes the string's UTF-16 code units itself.
func exactJSONString(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return false
	}
	s = s[1 : len(s)-1]
	var units []uint16
	for len(s) > 0 {
		if s[0] == '\\' {
			if s[1] == 'u' {
				n, _ := strconv.ParseUint(s[2:6], 16, 16)
				units = append(units, uint16(n))
				s = s[6:]
			} else {
				units = append(units, uint16(s[1]))
				s = s[2:]
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			return false
		}
		units = utf16.AppendRune(units, r)
		s = s[size:]
	}
	for i := 0; i < len(units); i++ {
		switch u := rune(units[i]); {
		case u >= 0xd800 && u < 0xdc00:
			if i+1 >= len(units) || units[i+1] < 0xdc00 || units[i+1] > 0xdfff {
				return false
			}
			i++
		case u >= 0xdc00 && u <= 0xdfff:
			return false
		}
	}
	return true
}

// fuzzVerifiers are a plain HMAC verifier and a strict one (issuer,
// audience, tenant claim).
func fuzzVerifiers(f *testing.F) []*Verifier {
	f.Helper()
	plain, err := NewVerifier(context.Background(), Options{HMACSecret: fuzzSecret})
	if err != nil {
		f.Fatal(err)
	}
	strict, err := NewVerifier(context.Background(), Options{HMACSecret: fuzzSecret, Issuer: "https://idp.test",
		Audience: "mcp-gateway", TenantClaim: "org", PrincipalClaim: "uid"})
	if err != nil {
		f.Fatal(err)
	}
	return []*Verifier{plain, strict}
}

// FuzzVerify checks the bearer front end: BearerToken against RFC 6750's
// syntax, and Verify on tokens signed with the verifier's secret over
// fuzzed headers and claims, and on any token text. It never panics; a
// token that verifies has the principal encoding/json reads from its
// claims, each owner claim a string that decodes without loss; anything
// else is an error that wraps ErrInvalidToken (or ErrMissingToken), says
// why, quotes nothing of the token, and makes a well-formed challenge.
func FuzzVerify(f *testing.F) {
	const exp = `4102444800` // 2100-01-01
	for _, s := range []struct{ header, payload, authz string }{
		{`{"alg":"HS256","typ":"JWT"}`, `{"sub":"alice","exp":` + exp + `}`, "Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig"},
		{`{"alg":"HS256","typ":"JWT"}`, `{"iss":"https://idp.test","aud":["mcp-gateway"],"uid":"bob","org":"acme","exp":` + exp + `,"iat":1700000000}`, "bearer  abc=="},
		{`{"alg":"HS384","typ":"JWT","kid":"k1"}`, `{"iss":"https://idp.test","aud":"mcp-gateway","uid":"b\u00f6b","sub":"x","org":"acme","exp":` + exp + `}`, "Basic dXNlcjpwYXNz"},
		{`{"alg":"HS512"}`, `{"sub":"victim\udc80","exp":` + exp + `}`, "Bearer"},
		{`{"alg":"HS256","crit":["b64"],"b64":false}`, `{"sub":"a","exp":` + exp + `}`, "Bearer a.b.c d"},
		{`{"alg":"none"}`, `{"sub":"a","exp":` + exp + `}`, "\tBEARER x~+/ \t"},
		{`{"alg":"HS256"}`, `{"sub":"\ufffd","sub":"a","iss":null,"exp":` + exp + `}`, ""},
		{`{"alg":"HS256"}`, `{"sub":"a","exp":"` + exp + `","nbf":1}`, "Bearer ="},
	} {
		f.Add([]byte(s.header), []byte(s.payload), byte(len(s.header)), s.authz)
	}
	verifiers := fuzzVerifiers(f)
	f.Fuzz(func(t *testing.T, header, payload []byte, alg byte, authz string) {
		a := int(alg) % len(fuzzAlgs)
		token := signFuzz(a, header, payload)
		for _, v := range verifiers {
			p, err := v.Verify(token)
			if err != nil {
				checkTokenError(t, token, err)
				continue
			}
			checkVerified(t, v, fuzzAlgs[a].name, header, payload, p)
		}
		checkBearer(t, verifiers[0], authz)
		if _, err := verifiers[0].Verify(authz); err != nil {
			checkTokenError(t, authz, err)
		} else {
			t.Fatalf("Verify(%q) accepted a token no one signed", authz)
		}
	})
}

// checkVerified checks an accepted token against what encoding/json reads.
func checkVerified(t *testing.T, v *Verifier, alg string, header, payload []byte, p Principal) {
	t.Helper()
	var head map[string]any
	if err := json.Unmarshal(header, &head); err != nil || head["alg"] != alg {
		t.Fatalf("header %s: accepted, but encoding/json reads %v (%v), want alg %s", header, head, err, alg)
	}
	if _, crit := head["crit"]; crit {
		t.Fatalf("header %s: accepted with critical parameters", header)
	}
	var claims map[string]any
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &claims); err != nil || json.Unmarshal(payload, &raw) != nil {
		t.Fatalf("claims %s: accepted, but encoding/json cannot read them: %v", payload, err)
	}
	if _, ok := claims["exp"].(float64); !ok {
		t.Fatalf("claims %s: accepted without a numeric exp", payload)
	}
	iss, hasIss := claims["iss"]
	want := Principal{TrustDomain: v.TrustDomain(), Subject: claims[v.principalClaim].(string)}
	if hasIss {
		want.Issuer, _ = iss.(string)
	}
	owners := []string{v.principalClaim}
	if hasIss {
		owners = append(owners, "iss")
	}
	if v.tenantClaim != "" {
		want.Tenant, _ = claims[v.tenantClaim].(string)
		owners = append(owners, v.tenantClaim)
	}
	if p != want || p.Subject == "" || v.tenantClaim != "" && p.Tenant == "" {
		t.Fatalf("claims %s: principal %+v, encoding/json reads %+v", payload, p, want)
	}
	for _, name := range owners {
		if !exactJSONString(raw[name]) {
			t.Fatalf("claims %s: accepted claim %q = %s, which does not decode exactly", payload, name, raw[name])
		}
	}
}

// checkTokenError checks a refusal: the right sentinel, a reason, nothing
// of the token, a challenge that is one well-formed header value.
func checkTokenError(t *testing.T, token string, err error) {
	t.Helper()
	msg := err.Error()
	switch {
	case token == "" && errors.Is(err, ErrMissingToken):
	case !errors.Is(err, ErrInvalidToken) || !strings.HasPrefix(msg, "invalid token: ") || len(msg) <= len("invalid token: "):
		t.Fatalf("Verify(%q): error %q is not a clear invalid-token error", token, msg)
	}
	for part := range strings.SplitSeq(token, ".") {
		if len(part) >= 8 && strings.Contains(msg, part) {
			t.Fatalf("Verify(%q): error %q quotes the token", token, msg)
		}
	}
	checkChallenge(t, err)
}

func checkChallenge(t *testing.T, err error) {
	t.Helper()
	c := Challenge(err, "mcp", "https://gw.example/rm")
	for i := 0; i < len(c); i++ {
		if c[i] < 0x20 && c[i] != '\t' || c[i] == 0x7f {
			t.Fatalf("Challenge(%v) = %q: a control character", err, c)
		}
	}
}

// checkBearer checks BearerToken on one Authorization header value against
// bearerRE, and the token it returns against Verify.
func checkBearer(t *testing.T, v *Verifier, authz string) {
	t.Helper()
	r := &http.Request{Header: http.Header{"Authorization": {authz}}}
	token, present, err := BearerToken(r)
	m := bearerRE.FindStringSubmatch(authz)
	switch {
	case m != nil:
		if err != nil || !present || token != m[1] {
			t.Fatalf("BearerToken(%q) = %q, %v, %v; want %q", authz, token, present, err, m[1])
		}
		if _, err := v.Verify(token); err != nil {
			checkTokenError(t, token, err)
		}
	case err == nil || token != "":
		t.Fatalf("BearerToken(%q) = %q, %v, %v; want an error", authz, token, present, err)
	case !errors.Is(err, ErrMissingToken) && !errors.Is(err, ErrInvalidToken):
		t.Fatalf("BearerToken(%q): error %v wraps neither ErrMissingToken nor ErrInvalidToken", authz, err)
	case len(strings.TrimSpace(authz)) >= 8 && strings.Contains(err.Error(), strings.TrimSpace(authz)):
		t.Fatalf("BearerToken(%q): error %v quotes the header", authz, err)
	default:
		checkChallenge(t, err)
	}
}
