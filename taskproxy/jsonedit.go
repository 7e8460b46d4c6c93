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
		for i < len(b) && !bytes.ContainsRune([]byte(",}] \t\r\n"), rune(b[i])) {
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

// member is the span of one object member's key and value.
type member struct {
	key                  string
	keyStart             int
	valueStart, valueEnd int
}

// objectMembers lists the members of the object at b (which must start with
// '{' after optional space), with the index of its closing brace.
func objectMembers(b []byte) ([]member, int, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, 0, errBadJSON
	}
	i++
	var members []member
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, 0, errBadJSON
		}
		if b[i] == '}' {
			return members, i, nil
		}
		if b[i] == ',' && len(members) > 0 {
			i = skipSpace(b, i+1)
		}
		if i >= len(b) || b[i] != '"' {
			return nil, 0, errBadJSON
		}
		keyEnd, err := skipString(b, i)
		if err != nil {
			return nil, 0, err
		}
		var key string
		if err := json.Unmarshal(b[i:keyEnd], &key); err != nil {
			return nil, 0, errBadJSON
		}
		j := skipSpace(b, keyEnd)
		if j >= len(b) || b[j] != ':' {
			return nil, 0, errBadJSON
		}
		vs := skipSpace(b, j+1)
		ve, err := skipValue(b, vs)
		if err != nil {
			return nil, 0, err
		}
		members = append(members, member{key: key, keyStart: i, valueStart: vs, valueEnd: ve})
		i = ve
	}
}

// arrayElements lists the spans of the elements of the array at b.
func arrayElements(b []byte) ([][2]int, error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errBadJSON
	}
	i++
	var elems [][2]int
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return nil, errBadJSON
		}
		if b[i] == ']' {
			return elems, nil
		}
		if b[i] == ',' && len(elems) > 0 {
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
	members, _, err := objectMembers(obj)
	if err != nil {
		return nil, false
	}
	for _, m := range members {
		if m.key == key {
			return obj[m.valueStart:m.valueEnd], true
		}
	}
	return nil, false
}

// setMember returns obj with key set to value: an existing member's value is
// replaced in place, a new member is appended before the closing brace.
func setMember(obj []byte, key string, value []byte) ([]byte, error) {
	members, closing, err := objectMembers(obj)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.key == key {
			return splice(obj, m.valueStart, m.valueEnd, value), nil
		}
	}
	keyJSON, _ := json.Marshal(key)
	ins := make([]byte, 0, len(keyJSON)+len(value)+2)
	if len(members) > 0 {
		ins = append(ins, ',')
	}
	ins = append(ins, keyJSON...)
	ins = append(ins, ':')
	ins = append(ins, value...)
	return splice(obj, closing, closing, ins), nil
}

// deleteMember returns obj without key (unchanged when key is absent).
func deleteMember(obj []byte, key string) ([]byte, error) {
	members, _, err := objectMembers(obj)
	if err != nil {
		return nil, err
	}
	for i, m := range members {
		if m.key != key {
			continue
		}
		start, end := m.keyStart, m.valueEnd
		switch {
		case i+1 < len(members): // remove through the next key
			end = members[i+1].keyStart
		case i > 0: // last member: remove from the previous value's end
			start = members[i-1].valueEnd
		}
		return splice(obj, start, end, nil), nil
	}
	return obj, nil
}

// setPath sets the member at path (a chain of object keys) to value,
// creating intermediate objects as needed.
func setPath(obj []byte, path []string, value []byte) ([]byte, error) {
	if len(path) == 1 {
		return setMember(obj, path[0], value)
	}
	inner, ok := getMember(obj, path[0])
	if !ok || len(bytes.TrimSpace(inner)) == 0 || bytes.TrimSpace(inner)[0] != '{' {
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
