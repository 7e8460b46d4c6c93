package auth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// exactClaims are a token's claims as jwt/v5 validates them (exp, nbf,
// iss, aud through the embedded MapClaims) together with the JSON text of
// each claim, from the very payload bytes the signature covers.
//
// The text is needed because decoding loses information: encoding/json
// turns invalid UTF-8 and lone surrogate escapes ("\udc80", "\ud800")
// into U+FFFD, so "victim\udc80", "victim\ud800", "victim" followed by a
// 0xFF byte, and "victim\ufffd" all decode to one string. Owner keys built
// from decoded values would make them one principal.
type exactClaims struct {
	jwt.MapClaims
	raw map[string]json.RawMessage
}

// UnmarshalJSON decodes the payload twice: into the map jwt/v5 validates,
// and into raw texts. Both use encoding/json on the same bytes, so they
// agree on which member a name selects (the last of duplicates).
func (c *exactClaims) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.MapClaims); err != nil {
		return fmt.Errorf("decoding claims: %w", err)
	}
	if err := json.Unmarshal(b, &c.raw); err != nil {
		return fmt.Errorf("decoding claim texts: %w", err)
	}
	return nil
}

// claimState says what exactString found.
type claimState int

const (
	claimAbsent    claimState = iota // no such claim, or null
	claimNotString                   // a number, object, array or boolean
	claimInexact                     // a string that does not decode losslessly
	claimOK
)

// stringClaim returns the claim name as an exact string. A literal U+FFFD
// (the escape "\ufffd" or its UTF-8 bytes) is accepted: it is a valid
// character, and once every lossy spelling is refused nothing else decodes
// to it, so it names one principal only.
func (c *exactClaims) stringClaim(name string) (string, claimState) {
	raw, ok := c.raw[name]
	if !ok {
		return "", claimAbsent
	}
	return exactString(raw)
}

// exactString decodes raw, one JSON value, when it is a string that
// encoding/json decodes without loss: valid UTF-8 throughout, and every
// \u escape of a surrogate half part of a high-then-low pair. Numbers and
// other types are refused rather than stringified, so that 42 and "42"
// never name one principal.
func exactString(raw json.RawMessage) (string, claimState) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return "", claimAbsent
	case raw[0] != '"':
		return "", claimNotString
	case !utf8.Valid(raw) || !pairedSurrogates(raw):
		return "", claimInexact
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", claimInexact
	}
	return s, claimOK
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
		if i+6 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
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
