package jsonx

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// Upstream SDKs do not all read object keys alike: Go's encoding/json (go-sdk,
// mcp-go) matches a key to a field under Unicode simple case folding and
// takes the last of duplicates ("NAME", or "nſme" with U+017F, is "name"),
// JavaScript's JSON.parse matches exactly and also takes the last. MatchKey
// tells a caller which keys another reader could take for a name it reads.

// MatchKey returns the index in names of mem's key (decoded, when it has
// escapes, as encoding/json decodes it) and, when no name matches exactly,
// whether one matches under simple case folding.
func MatchKey(obj []byte, mem Member, names []string) (exact int, folded bool) {
	key := obj[mem.KeyStart+1 : mem.KeyEnd-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var decoded string
		if json.Unmarshal(obj[mem.KeyStart:mem.KeyEnd], &decoded) != nil {
			return -1, false
		}
		key = []byte(decoded)
	}
	for i, name := range names {
		if string(key) == name {
			return i, false
		}
	}
	for _, name := range names {
		// The names are ASCII, and a rune that folds to an ASCII one is at
		// most 3 bytes long (U+212A, the Kelvin sign, for "k"): a key of
		// another length cannot match, and most keys stop here.
		if len(key) >= len(name) && len(key) <= 3*len(name) && EqualFold(key, name) {
			return -1, true
		}
	}
	return -1, false
}

// EqualFold is bytes.EqualFold(b, []byte(s)) without the conversion: it
// reports whether b and s, read as UTF-8 (an invalid byte is U+FFFD), are
// equal under simple Unicode case folding, the rule encoding/json matches
// keys with.
func EqualFold(b []byte, s string) bool {
	for len(b) > 0 && len(s) > 0 {
		r1, n1 := utf8.DecodeRune(b)
		r2, n2 := utf8.DecodeRuneInString(s)
		b, s = b[n1:], s[n2:]
		if r1 == r2 {
			continue
		}
		if r2 < r1 {
			r1, r2 = r2, r1
		}
		// The fold orbit of r1, in ascending order, as strings.EqualFold
		// walks it.
		r := unicode.SimpleFold(r1)
		for r != r1 && r < r2 {
			r = unicode.SimpleFold(r)
		}
		if r != r2 {
			return false
		}
	}
	return len(b) == 0 && len(s) == 0
}
