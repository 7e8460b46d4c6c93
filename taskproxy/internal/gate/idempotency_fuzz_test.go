package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// fingerprint is the fingerprint IdempotencyOf gives a keyed call of name
// with args.
func fingerprint(name string, args []byte) string {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Header.Set(HeaderIdempotencyKey, "k")
	_, fp := IdempotencyOf(r, callParams(name, args))
	return fp
}

func callParams(name string, args []byte) json.RawMessage {
	quoted, _ := json.Marshal(name)
	return json.RawMessage(`{"name":` + string(quoted) + `,"arguments":` + string(args) + `}`)
}

// readCall is the reference: the call as encoding/json reads it, numbers
// kept as written (the fingerprint promises literal digits, no rounding).
func readCall(params []byte) (name string, args any, ok bool) {
	var call struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if dec.Decode(&call) != nil || !json.Valid(params) {
		return "", nil, false
	}
	return call.Name, call.Arguments, true
}

// respeller writes a decoded value back as other JSON text encoding/json
// reads as the same value: keys in another order, other spacing, characters
// escaped or not, numbers as written. With bump >= 0 it changes the
// bump-th number it writes to one of another value that float64 cannot
// tell apart from it.
type respeller struct {
	seed    uint64
	bump    int
	numbers int
	b       strings.Builder
}

// next returns a pseudo-random number from the seed (xorshift).
func (s *respeller) next() uint64 {
	s.seed ^= s.seed << 13
	s.seed ^= s.seed >> 7
	s.seed ^= s.seed << 17
	return s.seed
}

func (s *respeller) space() {
	s.b.WriteString([]string{"", "", " ", "\n\t", "\r\n  "}[s.next()%5])
}

func (s *respeller) write(v any) {
	s.space()
	switch v := v.(type) {
	case nil:
		s.b.WriteString("null")
	case bool:
		fmt.Fprint(&s.b, v)
	case json.Number:
		lit := string(v)
		if s.numbers == s.bump {
			lit = nudge(lit)
		}
		s.numbers++
		s.b.WriteString(lit)
	case string:
		s.str(v)
	case []any:
		s.b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				s.b.WriteByte(',')
			}
			s.write(e)
		}
		s.space()
		s.b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if s.next()%2 == 0 {
			slices.Reverse(keys)
		}
		if len(keys) > 0 { // and rotated
			n := int(s.next() % uint64(len(keys)))
			keys = append(keys[n:], keys[:n]...)
		}
		s.b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				s.b.WriteByte(',')
			}
			s.space()
			s.str(k)
			s.space()
			s.b.WriteByte(':')
			s.write(v[k])
		}
		s.space()
		s.b.WriteByte('}')
	}
	s.space()
}

// str writes a JSON string holding v, escaping some characters that need
// no escape (as \uXXXX, surrogate pairs beyond the BMP, or \/).
func (s *respeller) str(v string) {
	s.b.WriteByte('"')
	for _, r := range v {
		switch {
		case r == '"' || r == '\\':
			s.b.WriteByte('\\')
			s.b.WriteRune(r)
		case r < 0x20 || s.next()%4 == 0:
			if r == '/' && s.next()%2 == 0 {
				s.b.WriteString(`\/`)
				continue
			}
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(&s.b, `\u%04x`, u)
			}
		default:
			s.b.WriteRune(r)
		}
	}
	s.b.WriteByte('"')
}

// nudge returns a number literal of another value than lit that rounds to
// the same float64: lit with a digit appended far past its last one.
func nudge(lit string) string {
	mantissa, exp := lit, ""
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mantissa, exp = lit[:i], lit[i:]
	}
	if strings.Contains(mantissa, ".") {
		return mantissa + "0000000000000000001" + exp
	}
	return mantissa + ".0000000000000000001" + exp
}

// FuzzIdempotencyFingerprint checks the fingerprint of a keyed call against
// encoding/json: two calls fingerprint alike exactly when encoding/json
// reads the same tool name and the same arguments (numbers compared by
// their digits, as CanonicalJSON promises), however the arguments are
// spelled: key order, spacing and escapes do not count, and a number
// float64 cannot tell from another still fingerprints apart.
func FuzzIdempotencyFingerprint(f *testing.F) {
	for _, s := range []struct{ name, a, b string }{
		// arguments the end-to-end tests and fixtures send
		{"slow_compute", `{"seconds":1,"label":"x"}`, `{"label":"x","seconds":1}`},
		{"greet", `{"name":"x"}`, `{"name":"y"}`},
		{"echo", `{"message":"batched call ran"}`, `{ "message" : "batched call ran" }`},
		{"big_result", `{"bytes":67108864}`, `{"bytes":6.7108864e7}`},
		{"t", `{"a":1,"b":[1,2]}`, `{"b":[1, 2], "a":1}`},
		{"t", `{"n":9007199254740993}`, `{"n":9007199254740992}`},
		{"t", `{"n":0.10000000000000000001}`, `{"n":0.1}`},
		{"t", `{"s":"\u00e9\ud83d\ude00"}`, `{"s":"é😀"}`},
		{"t", `{"a":1,"a":2}`, `{"a":2}`},
		{"t", `null`, `{}`},
		{"t", `[]`, `[1e0]`},
	} {
		f.Add(s.name, []byte(s.a), []byte(s.b), uint64(len(s.a)))
	}
	f.Fuzz(func(t *testing.T, name string, a, b []byte, seed uint64) {
		paramsA := callParams(name, a)
		nameA, argsA, ok := readCall(paramsA)
		if !ok {
			return
		}
		fpA := fingerprint(name, a)
		if paramsB := callParams(name, b); json.Valid(paramsB) {
			nameB, argsB, ok := readCall(paramsB)
			same := ok && nameA == nameB && reflect.DeepEqual(argsA, argsB)
			if got := fpA == fingerprint(name, b); ok && got != same {
				t.Fatalf("arguments %s and %s: same fingerprint %v, encoding/json reads them as equal: %v", a, b, got, same)
			}
		}

		s := &respeller{seed: seed | 1, bump: -1}
		s.write(argsA)
		respelled := s.b.String()
		if _, again, ok := readCall(callParams(name, []byte(respelled))); !ok || !reflect.DeepEqual(again, argsA) {
			t.Fatalf("test bug: %s respelled as %s reads as %v", a, respelled, again)
		}
		if fingerprint(name, []byte(respelled)) != fpA {
			t.Fatalf("arguments %s and %s (the same to encoding/json) fingerprint apart", a, respelled)
		}
		if s.numbers == 0 {
			return
		}
		n := &respeller{seed: seed | 1, bump: int(seed % uint64(s.numbers))}
		n.write(argsA)
		nudged := n.b.String()
		if fingerprint(name, []byte(nudged)) == fpA {
			t.Fatalf("arguments %s and %s (another number) fingerprint alike", a, nudged)
		}
		if nameB := string(bytes.ToUpper([]byte(name))); utf8.ValidString(name) && nameB != name && fingerprint(nameB, a) == fpA {
			t.Fatalf("tools %q and %q fingerprint alike", name, nameB)
		}
	})
}
