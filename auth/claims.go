package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// principal extracts the Principal from the verified claims of token. The
// issuer, principal and tenant claims go into the owner key, so each must
// be a string that decoded without loss (see exactText): anything else is
// refused, never normalised into another principal's name.
func (v *Verifier) principal(token string, c jwt.MapClaims) (Principal, error) {
	iss, err := c.GetIssuer()
	if err != nil {
		return Principal{}, invalid(`claim "iss" is not a string`, jwt.ErrInvalidType)
	}
	sub, ok := c[v.principalClaim].(string)
	if !ok || sub == "" {
		return Principal{}, invalid(fmt.Sprintf("principal claim %q is missing, empty or not a string", v.principalClaim), jwt.ErrTokenRequiredClaimMissing)
	}
	p := Principal{TrustDomain: v.trustDomain, Issuer: iss, Subject: sub}
	if v.tenantClaim != "" {
		tenant, ok := c[v.tenantClaim].(string)
		if !ok || tenant == "" {
			return Principal{}, invalid(fmt.Sprintf("tenant claim %q is missing, empty or not a string", v.tenantClaim), jwt.ErrTokenRequiredClaimMissing)
		}
		p.Tenant = tenant
	}
	if err := v.exactText(token, [...]ownerClaim{
		{"issuer", "iss", p.Issuer},
		{"principal", v.principalClaim, p.Subject},
		{"tenant", v.tenantClaim, p.Tenant},
	}); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// ownerClaim is a decoded claim that goes into the owner key.
type ownerClaim struct {
	role, name, value string // role names it in errors: "principal"
}

// exactText refuses a token whose owner claims decoded with loss.
//
// encoding/json turns invalid UTF-8 and lone surrogate escapes ("\udc80",
// "\ud800") into U+FFFD, so "victim\udc80", "victim\ud800", "victim"
// followed by a 0xFF byte, and a genuine "victim\ufffd" all decode to one
// string: owner keys built from decoded values would make them one
// principal. Every lossy decoding leaves a U+FFFD, so a value without one
// decoded exactly, and only a value with one (rare) has its JSON text read
// from the signed payload and checked. A genuine U+FFFD, the escape
// "\ufffd" or its UTF-8 bytes, is accepted: it is valid text, and with the
// lossy spellings refused it names one principal only.
func (v *Verifier) exactText(token string, claims [3]ownerClaim) error {
	var raw map[string]json.RawMessage
	for _, c := range claims {
		if !strings.ContainsRune(c.value, utf8.RuneError) {
			continue
		}
		if raw == nil {
			var err error
			if raw, err = v.rawClaims(token); err != nil {
				return invalid("token is malformed", jwt.ErrTokenMalformed)
			}
		}
		if !exactString(raw[c.name]) {
			return invalid(fmt.Sprintf("%s claim %q is not valid Unicode text", c.role, c.name), jwt.ErrInvalidType)
		}
	}
	return nil
}

// rawClaims returns the JSON text of each claim of token, decoded from the
// payload segment as the parser decoded it to verify the token. Both use
// encoding/json on the same bytes, so they agree on which member a name
// selects (the last of duplicates).
func (v *Verifier) rawClaims(token string) (map[string]json.RawMessage, error) {
	_, rest, _ := strings.Cut(token, ".")
	payload, _, _ := strings.Cut(rest, ".")
	b, err := v.parser.DecodeSegment(payload)
	if err != nil {
		return nil, fmt.Errorf("decoding the payload: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("decoding the claims: %w", err)
	}
	return raw, nil
}

// exactString reports whether raw, one JSON value, is a string that
// encoding/json decodes without loss: valid UTF-8 throughout, and every
// \u escape of a surrogate half part of a high-then-low pair.
func exactString(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) >= 2 && raw[0] == '"' && utf8.Valid(raw) && pairedSurrogates(raw)
}

// pairedSurrogates reports whether every \u escape of a surrogate half in
// the JSON string raw is a high half directly followed by an escaped low
// half, the only spelling encoding/json decodes to the character it means.
func pairedSurrogates(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character; a backslash here is "\\", skipped whole
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return false
		}
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		if r >= 0xdc00 { // a low half with no high half before it
			return false
		}
		if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
			return false
		}
		low, ok := hex4(raw, i+3)
		if !ok || low < 0xdc00 || low > 0xdfff {
			return false
		}
		i += 6
	}
	return true
}

// hex4 decodes the four hex digits of raw at i.
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(raw[i:i+4]), 16, 16)
	return rune(n), err == nil
}
