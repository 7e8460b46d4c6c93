package jsonx

import (
	"errors"
	"fmt"
	"math"
)

// Numbers as JSON Schema reads them. JSON has one kind of number; JSON
// Schema's "integer" is any number with an integral value, however it is
// spelled: 5000, 5000.0, 5e3, 5.0E+3 and 5000.000 are all the integer 5000,
// and -0.0 is 0. Runtimes that keep such fields as floats (Python's, for
// one) write them with a fraction part, and encoding/json refuses those for
// an int64 field. Int reads them all exactly, from the decimal digits,
// without going through a float (5e3 is exact; 9007199254740993 is not
// rounded), and in time linear in the length of the spelling: an exponent
// such as 1e400 or 1e-99999999999 is neither expanded nor looped over.

// Errors of Int, told apart with errors.Is.
var (
	// ErrNotNumber: the value is not a JSON number (a string "5000", null,
	// an object, or not JSON at all).
	ErrNotNumber = errors.New("not a number")
	// ErrNotIntegral: a number with a fraction, such as 5000.5 or 1e-3.
	ErrNotIntegral = errors.New("not an integer")
	// ErrIntRange: an integer beyond a 64-bit integer's range, such as 1e19.
	ErrIntRange = errors.New("out of range")
)

// maxDigits is the number of decimal digits of the largest int64.
const maxDigits = 19

// Int reads raw, one JSON number (JSON whitespace around it aside), as the
// int64 it stands for. It fails with ErrNotNumber, ErrNotIntegral or
// ErrIntRange (the latter also for -9223372036854775809 and below; the
// error then says which way: see IntRangeSign).
func Int(raw []byte) (int64, error) {
	raw = trimSpace(raw)
	neg := len(raw) > 0 && raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	// Integer digits: 0, or a nonzero digit and any digits.
	i := 0
	for i < len(raw) && isDigit(raw[i]) {
		i++
	}
	if i == 0 || (raw[0] == '0' && i > 1) {
		return 0, ErrNotNumber
	}
	intPart := raw[:i]
	var frac []byte
	if i < len(raw) && raw[i] == '.' {
		j := i + 1
		for j < len(raw) && isDigit(raw[j]) {
			j++
		}
		if j == i+1 {
			return 0, ErrNotNumber
		}
		frac, i = raw[i+1:j], j
	}
	exp := int64(0)
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		expNeg := false
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			expNeg = raw[i] == '-'
			i++
		}
		start := i
		for i < len(raw) && isDigit(raw[i]) {
			// Saturates far beyond any spelling that fits in memory:
			// 1e99999999999999999999 is as out of range as 1e400.
			if exp < 1<<40 {
				exp = exp*10 + int64(raw[i]-'0')
			}
			i++
		}
		if i == start {
			return 0, ErrNotNumber
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(raw) {
		return 0, ErrNotNumber
	}
	// The value is digits × 10^exp, digits being the integer and the
	// fraction digits without leading zeros nor trailing zeros (each
	// trailing zero taken into exp).
	exp -= int64(len(frac))
	lead, trail := 0, 0
	total := len(intPart) + len(frac)
	digitAt := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	for lead < total && digitAt(lead) == '0' {
		lead++
	}
	if lead == total {
		return 0, nil // zero in any spelling: 0, -0.0, 0e99999
	}
	for digitAt(total-1-trail) == '0' {
		trail++
	}
	exp += int64(trail)
	n := total - lead - trail
	// digits has no trailing zero, so digits × 10^exp with exp < 0 has a
	// fraction.
	if exp < 0 {
		return 0, ErrNotIntegral
	}
	if int64(n)+exp > maxDigits {
		return 0, rangeError(neg)
	}
	var u uint64 // at most 19 digits: fits
	for k := lead; k < lead+n; k++ {
		u = u*10 + uint64(digitAt(k)-'0')
	}
	for range exp {
		u *= 10
	}
	switch {
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	case neg && u <= 1<<63:
		return int64(-u), nil //nolint:gosec // -(1<<63) wraps to MinInt64, which it is
	}
	return 0, rangeError(neg)
}

// intRangeError is ErrIntRange with the side the value lies on.
type intRangeError struct{ negative bool }

func (e intRangeError) Error() string {
	if e.negative {
		return "out of range (below -9223372036854775808)"
	}
	return "out of range (above 9223372036854775807)"
}

func (e intRangeError) Is(target error) bool { return target == ErrIntRange }

func rangeError(negative bool) error { return intRangeError{negative} }

// IntRangeSign says which way an ErrIntRange error of Int went: -1 below
// the range, +1 above it, 0 for any other error.
func IntRangeSign(err error) int {
	var r intRangeError
	if !errors.As(err, &r) {
		return 0
	}
	if r.negative {
		return -1
	}
	return 1
}

// ClampInt reads raw as Int does and brings the value into [lo, hi]; an
// integer beyond int64's range is clamped too. It is for numbers from a
// peer whose value is advice (an interval, a retention): clamped reports
// whether the value was moved, and err is Int's ErrNotNumber or
// ErrNotIntegral, for which v is zero and the value is to be ignored.
func ClampInt(raw []byte, lo, hi int64) (v int64, clamped bool, err error) {
	v, err = Int(raw)
	switch sign := IntRangeSign(err); {
	case sign > 0:
		return hi, true, nil
	case sign < 0:
		return lo, true, nil
	case err != nil:
		return 0, false, err
	case v < lo:
		return lo, true, nil
	case v > hi:
		return hi, true, nil
	}
	return v, false, nil
}

// Integer is an int64 field decoded by encoding/json the way Int reads a
// number: 5000.0 and 5e3 decode to 5000, 5000.5 and 1e19 are errors (a
// *NumberError; encoding/json does not add the field's name, so the caller
// names it). null leaves the field as it was, as for an int64. It is for fields that must be exact,
// such as a client's parameters, where a bad value is refused.
type Integer int64

// UnmarshalJSON implements json.Unmarshaler.
func (n *Integer) UnmarshalJSON(b []byte) error {
	if string(trimSpace(b)) == "null" {
		return nil
	}
	v, err := Int(b)
	if err != nil {
		return &NumberError{Value: string(b), Err: err}
	}
	*n = Integer(v)
	return nil
}

// NumberError is Integer's error: the value as sent and Int's error.
type NumberError struct {
	Value string
	Err   error
}

func (e *NumberError) Error() string {
	v := e.Value
	if len(v) > 40 {
		v = v[:40] + "…"
	}
	return fmt.Sprintf("%s is %v", v, e.Err)
}

func (e *NumberError) Unwrap() error { return e.Err }

// LenientInteger is an int64 field decoded by encoding/json without ever
// failing the decode: for numbers a peer sends as advice (an upstream's
// poll interval), where one odd value must not lose the rest of the answer.
// An integral value in any spelling is Value; one beyond int64's range is
// clamped to its end; anything else (a fraction, a string, an object) is
// ignored. Err says what was clamped or ignored, for a debug log; Set
// reports a usable Value (absent and null are not set).
type LenientInteger struct {
	Value int64
	Set   bool
	Err   error
}

// UnmarshalJSON implements json.Unmarshaler; it never returns an error.
func (n *LenientInteger) UnmarshalJSON(b []byte) error {
	*n = LenientInteger{}
	if string(trimSpace(b)) == "null" {
		return nil
	}
	v, clamped, err := ClampInt(b, math.MinInt64, math.MaxInt64)
	switch {
	case err != nil:
		n.Err = &NumberError{Value: string(b), Err: err}
	case clamped:
		n.Value, n.Set = v, true
		n.Err = &NumberError{Value: string(b), Err: ErrIntRange}
	default:
		n.Value, n.Set = v, true
	}
	return nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
