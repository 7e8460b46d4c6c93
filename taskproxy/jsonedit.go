package taskproxy

import (
	"bytes"
	"encoding/json"
	"errors"
)

// The gateway edits upstream results in place: it sets one member of one
// object and leaves every other byte as the upstream sent it. These helpers
// find value spans with a small scanner instead of decoding and re-encoding,
// which would reorder keys, re-escape strings and change number formats.

var errBadJSON = errors.New("malformed JSON")

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, errBadJSON
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errBadJSON
	default:
		start := i
	scalar:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				break scalar
			}
			i++
		}
		if i == start {
			return 0, errBadJSON
		}
		return i, nil
	}
}

func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errBadJSON
}

// member is the span of one object member: its key (quotes included) and
// its value.
type member struct {
	keyStart, keyEnd     int
	valueStart, valueEnd int
}

// is reports whether the member's key, in obj, is key. Keys without escapes,
// the usual case, compare without decoding or allocating.
func (m member) is(obj []byte, key string) bool {
	raw := obj[m.keyStart+1 : m.keyEnd-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	var decoded string
	return json.Unmarshal(obj[m.keyStart:m.keyEnd], &decoded) == nil && decoded == key
}

// eachMember calls fn for every member of the object at obj, in order,
// until fn returns false; it returns the index of the closing brace (or of
// the point where fn stopped).
func eachMember(obj []byte, fn func(member) bool) (int, error) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, errBadJSON
	}
	i++
	first := true
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) {
			return 0, errBadJSON
		}
		if obj[i] == '}' {
			return i, nil
		}
		if !first {
			if obj[i] != ',' {
				return 0, errBadJSON
			}
			i = skipSpace(obj, i+1)
		}
		first = false
		if i >= len(obj) || obj[i] != '"' {
			return 0, errBadJSON
		}
		keyEnd, err := skipString(obj, i)
		if err != nil {
			return 0, err
		}
		j := skipSpace(obj, keyEnd)
		if j >= len(obj) || obj[j] != ':' {
			return 0, errBadJSON
		}
		vs := skipSpace(obj, j+1)
		ve, err := skipValue(obj, vs)
		if err != nil {
			return 0, err
		}
		if !fn(member{keyStart: i, keyEnd: keyEnd, valueStart: vs, valueEnd: ve}) {
			return i, nil
		}
		i = ve
	}
}

// findMember returns the member key of obj and whether it exists, with the
// index of the closing brace when it does not, and the member count seen.
func findMember(obj []byte, key string) (m member, found bool, closing, count int, err error) {
	closing, err = eachMember(obj, func(cur member) bool {
		count++
		if cur.is(obj, key) {
			m, found = cur, true
			return false
		}
		return true
	})
	return m, found, closing, count, err
}

// arrayElements lists the spans of the elements of the array at b.
func arrayElements(b []byte) ([][2]int, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errBadJSON
	}
	i++
	elems := make([][2]int, 0, 16) // tools/list pages are often this long: one allocation
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, errBadJSON
		}
		if b[i] == ']' {
			return elems, nil
		}
		if len(elems) > 0 {
			if b[i] != ',' {
				return nil, errBadJSON
			}
			i = skipSpace(b, i+1)
		}
		end, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		elems = append(elems, [2]int{i, end})
		i = end
	}
}

// getMember returns the raw value of key in the object obj.
func getMember(obj []byte, key string) ([]byte, bool) {
	m, found, _, _, err := findMember(obj, key)
	if err != nil || !found {
		return nil, false
	}
	return obj[m.valueStart:m.valueEnd], true
}

// setMember returns obj with key set to value: an existing member's value is
// replaced in place, a new member is appended before the closing brace.
func setMember(obj []byte, key string, value []byte) ([]byte, error) {
	m, found, closing, count, err := findMember(obj, key)
	if err != nil {
		return nil, err
	}
	if found {
		return splice(obj, m.valueStart, m.valueEnd, value), nil
	}
	ins := make([]byte, 0, len(key)+len(value)+4)
	if count > 0 {
		ins = append(ins, ',')
	}
	ins = appendJSONString(ins, key)
	ins = append(ins, ':')
	ins = append(ins, value...)
	return splice(obj, closing, closing, ins), nil
}

// appendJSONString appends key as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			quoted, _ := json.Marshal(s)
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// deleteMember returns obj without key (unchanged when key is absent).
func deleteMember(obj []byte, key string) ([]byte, error) {
	var prev, target, next member
	var found, hasPrev, hasNext bool
	_, err := eachMember(obj, func(cur member) bool {
		switch {
		case found:
			next, hasNext = cur, true
			return false
		case cur.is(obj, key):
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
	start, end := target.keyStart, target.valueEnd
	switch {
	case hasNext: // remove through the next key
		end = next.keyStart
	case hasPrev: // last member: remove from the previous value's end
		start = prev.valueEnd
	}
	return splice(obj, start, end, nil), nil
}

// setPath sets the member at path (a chain of object keys) to value,
// creating intermediate objects as needed.
func setPath(obj []byte, path []string, value []byte) ([]byte, error) {
	if len(path) == 1 {
		return setMember(obj, path[0], value)
	}
	inner, ok := getMember(obj, path[0])
	if !ok || len(inner) == 0 || inner[0] != '{' {
		inner = []byte("{}")
	}
	updated, err := setPath(inner, path[1:], value)
	if err != nil {
		return nil, err
	}
	return setMember(obj, path[0], updated)
}

func splice(b []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(with))
	out = append(out, b[:start]...)
	out = append(out, with...)
	return append(out, b[end:]...)
}
