package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrMalformed is input the scanner cannot read as JSON.
var ErrMalformed = errors.New("malformed JSON")

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, tab, LF, CR).
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the index just past the JSON value starting at b[i].
func SkipValue(b []byte, i int) (int, error) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return 0, ErrMalformed
	}
	switch b[i] {
	case '"':
		return SkipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := SkipString(b, i)
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
		return 0, ErrMalformed
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
			return 0, ErrMalformed
		}
		return i, nil
	}
}

// SkipString returns the index just past the JSON string starting at b[i].
func SkipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, ErrMalformed
}

// Member is the span of one object member: its key (quotes included) and
// its value.
type Member struct {
	KeyStart, KeyEnd     int
	ValueStart, ValueEnd int
}

// Is reports whether the member's key, in obj, is key. Keys without escapes,
// the usual case, compare without decoding or allocating.
func (m Member) Is(obj []byte, key string) bool {
	raw := obj[m.KeyStart+1 : m.KeyEnd-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == key
	}
	var decoded string
	return json.Unmarshal(obj[m.KeyStart:m.KeyEnd], &decoded) == nil && decoded == key
}

// EachMember calls fn for every member of the object at obj, in order,
// until fn returns false; it returns the index of the closing brace (or of
// the point where fn stopped).
func EachMember(obj []byte, fn func(Member) bool) (int, error) {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return 0, ErrMalformed
	}
	i++
	first := true
	for {
		i = SkipSpace(obj, i)
		if i >= len(obj) {
			return 0, ErrMalformed
		}
		if obj[i] == '}' {
			return i, nil
		}
		if !first {
			if obj[i] != ',' {
				return 0, ErrMalformed
			}
			i = SkipSpace(obj, i+1)
		}
		first = false
		if i >= len(obj) || obj[i] != '"' {
			return 0, ErrMalformed
		}
		KeyEnd, err := SkipString(obj, i)
		if err != nil {
			return 0, err
		}
		j := SkipSpace(obj, KeyEnd)
		if j >= len(obj) || obj[j] != ':' {
			return 0, ErrMalformed
		}
		vs := SkipSpace(obj, j+1)
		ve, err := SkipValue(obj, vs)
		if err != nil {
			return 0, err
		}
		if !fn(Member{KeyStart: i, KeyEnd: KeyEnd, ValueStart: vs, ValueEnd: ve}) {
			return i, nil
		}
		i = ve
	}
}

// FindMember returns the member key of obj and whether it exists, with the
// index of the closing brace when it does not, and the member count seen.
func FindMember(obj []byte, key string) (m Member, found bool, closing, count int, err error) {
	closing, err = EachMember(obj, func(cur Member) bool {
		count++
		if cur.Is(obj, key) {
			m, found = cur, true
			return false
		}
		return true
	})
	return m, found, closing, count, err
}

// ArrayElements lists the spans of the elements of the array at b.
func ArrayElements(b []byte) ([][2]int, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, ErrMalformed
	}
	i++
	elems := make([][2]int, 0, 16) // tools/list pages are often this long: one allocation
	for {
		i = SkipSpace(b, i)
		if i >= len(b) {
			return nil, ErrMalformed
		}
		if b[i] == ']' {
			return elems, nil
		}
		if len(elems) > 0 {
			if b[i] != ',' {
				return nil, ErrMalformed
			}
			i = SkipSpace(b, i+1)
		}
		end, err := SkipValue(b, i)
		if err != nil {
			return nil, err
		}
		elems = append(elems, [2]int{i, end})
		i = end
	}
}

// CountElements counts the elements of the JSON array at b, stopping after
// limit+1 of them, without decoding any.
func CountElements(b []byte, limit int) (int, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return 0, ErrMalformed
	}
	i++
	for n := 0; ; n++ {
		i = SkipSpace(b, i)
		if i >= len(b) {
			return 0, ErrMalformed
		}
		if b[i] == ']' || n > limit {
			return n, nil
		}
		if n > 0 {
			if b[i] != ',' {
				return 0, ErrMalformed
			}
			i = SkipSpace(b, i+1)
		}
		end, err := SkipValue(b, i)
		if err != nil {
			return 0, err
		}
		i = end
	}
}
