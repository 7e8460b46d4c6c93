package jsonx

// Valid reports whether data is one JSON value with nothing around it but
// whitespace, exactly as encoding/json.Valid does (strings are not checked
// for UTF-8, containers nest at most maxDepth deep), in one pass of plain
// loops instead of encoding/json's state machine: the gateway checks every
// request body with it.
func Valid(data []byte) bool {
	i, ok := validValue(data, SkipSpace(data, 0), 0)
	return ok && SkipSpace(data, i) == len(data)
}

// ValidObject reports whether data is one JSON object with nothing around
// it but whitespace, exactly as Valid does for an object, and calls fn
// with each of its members, in order, as soon as the member is checked,
// until fn returns false; the rest is checked all the same. A caller that
// reads the members of a body it must also validate reads it once, not
// twice, this way (the gateway's envelope of every request). A flaw after
// a member fn saw still makes ValidObject false: keep nothing of what fn
// saw unless it returns true.
func ValidObject(data []byte, fn func(Member) bool) bool {
	i := SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	// The object opens at depth 0, as Valid counts, and holds its members
	// at depth 1.
	end, ok := validContainer(data, i, 1, fn)
	return ok && SkipSpace(data, end) == len(data)
}

// maxDepth is encoding/json's limit on the nesting of objects and arrays.
const maxDepth = 10000

// validValue checks the value at b[i], inside depth containers, and
// returns the index just past it.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, false
		}
		return validContainer(b, i, depth+1, nil)
	case c == '"':
		return validString(b, i)
	case c == '-' || '0' <= c && c <= '9':
		return validNumber(b, i)
	case c == 't':
		return validLiteral(b, i, "true")
	case c == 'f':
		return validLiteral(b, i, "false")
	case c == 'n':
		return validLiteral(b, i, "null")
	}
	return i, false
}

// validContainer checks the object or array opening at b[i], its members
// or elements at depth. For an object, fn (when not nil) is called with
// each member once it is checked, until it returns false.
func validContainer(b []byte, i, depth int, fn func(Member) bool) (int, bool) {
	closing := byte(']')
	if b[i] == '{' {
		closing = '}'
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, true
	}
	for {
		var ok bool
		keyStart, keyEnd := i, i
		if closing == '}' {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			if i, ok = validString(b, i); !ok {
				return i, false
			}
			keyEnd = i
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			i = SkipSpace(b, i+1)
		}
		valueStart := i
		if i, ok = validValue(b, i, depth); !ok {
			return i, false
		}
		if fn != nil && !fn(Member{KeyStart: keyStart, KeyEnd: keyEnd, ValueStart: valueStart, ValueEnd: i}) {
			fn = nil // the rest is checked all the same
		}
		i = SkipSpace(b, i)
		switch {
		case i >= len(b):
			return i, false
		case b[i] == closing:
			return i + 1, true
		case b[i] != ',':
			return i, false
		}
		i = SkipSpace(b, i+1)
	}
}

// validString checks the string opening at b[i]: no control characters,
// only JSON's escapes.
func validString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return j, false
		case c == '\\':
			j++
			if j >= len(b) {
				return j, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return j, false
				}
				j += 4
			default:
				return j, false
			}
		}
	}
	return len(b), false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validNumber checks the number at b[i] by JSON's grammar: an optional
// minus, an integer part without leading zeros, then optional fraction and
// exponent parts, each with at least one digit.
func validNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return i, false
	case b[i] == '0':
		i++
	case isDigit(b[i]):
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < len(b) && isDigit(b[i]); i++ {
		}
	}
	return i, true
}

// validLiteral checks that b[i:] starts with lit.
func validLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}
