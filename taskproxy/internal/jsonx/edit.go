package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Get returns the raw value of key in the object obj.
func Get(obj []byte, key string) ([]byte, bool) {
	m, found, _, _, err := FindMember(obj, key)
	if err != nil || !found {
		return nil, false
	}
	return obj[m.ValueStart:m.ValueEnd], true
}

// Set returns obj with key set to value: an existing member's value is
// replaced in place, a new member is appended before the closing brace.
func Set(obj []byte, key string, value []byte) ([]byte, error) {
	m, found, closing, count, err := FindMember(obj, key)
	if err != nil {
		return nil, err
	}
	if found {
		return Splice(obj, m.ValueStart, m.ValueEnd, value), nil
	}
	return insertMember(obj, closing, count, key, value), nil
}

// Delete returns obj without key (unchanged when key is absent).
func Delete(obj []byte, key string) ([]byte, error) {
	var prev, target, next Member
	var found, hasPrev, hasNext bool
	_, err := EachMember(obj, func(cur Member) bool {
		switch {
		case found:
			next, hasNext = cur, true
			return false
		case cur.Is(obj, key):
			target, found = cur, true
		default:
			prev, hasPrev = cur, true
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return obj, nil
	}
	start, end := target.KeyStart, target.ValueEnd
	switch {
	case hasNext: // remove through the next key
		end = next.KeyStart
	case hasPrev: // last member: remove from the previous value's end
		start = prev.ValueEnd
	}
	return Splice(obj, start, end, nil), nil
}

// SetPath sets the member at path (a chain of object keys) to value,
// creating intermediate objects as needed. An empty path names no member
// and is an error.
func SetPath(obj []byte, path []string, value []byte) ([]byte, error) {
	if len(path) == 0 {
		return nil, errors.New("setting a member: empty path")
	}
	key, rest := path[0], path[1:]
	if len(rest) == 0 {
		return Set(obj, key, value)
	}
	inner, ok := Get(obj, key)
	if !ok || len(inner) == 0 || inner[0] != '{' {
		inner = []byte("{}")
	}
	updated, err := SetPath(inner, rest, value)
	if err != nil {
		return nil, err
	}
	return Set(obj, key, updated)
}

// Splice returns a copy of b with b[start:end] replaced by with.
func Splice(b []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(with))
	out = append(out, b[:start]...)
	out = append(out, with...)
	return append(out, b[end:]...)
}

// Unquote returns the string a raw JSON string holds ("" for anything else),
// as encoding/json decodes it: invalid UTF-8 becomes U+FFFD.
func Unquote(raw []byte) string {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// GetOr returns the member key of obj, or nil.
func GetOr(obj []byte, key string) json.RawMessage {
	v, _ := Get(obj, key)
	return v
}

// OrEmptyObject returns raw, or {} when raw is absent or null.
func OrEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

// MarshalString appends s quoted as json.Marshal quotes it (HTML characters
// escaped) and reports whether that succeeded: printable ASCII that needs no
// escape is copied, anything else goes through encoding/json.
func MarshalString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, err := json.Marshal(s)
			return append(b, data...), err == nil
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// DeleteIn returns obj with the members of its object member parent for
// which drop reports true removed, and parent itself removed when nothing is
// left in it (an empty parent too). obj comes back unchanged when parent is
// absent or not an object, or holds members and none is dropped.
func DeleteIn(obj []byte, parent string, drop func(key string) bool) ([]byte, error) {
	inner, ok := Get(obj, parent)
	if !ok || len(inner) == 0 || inner[0] != '{' {
		return obj, nil
	}
	var keys []string
	left := 0
	if _, err := EachMember(inner, func(m Member) bool {
		var k string
		if json.Unmarshal(inner[m.KeyStart:m.KeyEnd], &k) == nil && drop(k) {
			keys = append(keys, k)
		} else {
			left++
		}
		return true
	}); err != nil {
		return nil, err
	}
	if left == 0 {
		return Delete(obj, parent)
	}
	if len(keys) == 0 {
		return obj, nil
	}
	for _, k := range keys {
		var err error
		if inner, err = Delete(inner, k); err != nil {
			return nil, err
		}
	}
	return Set(obj, parent, inner)
}
