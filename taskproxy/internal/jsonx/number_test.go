package jsonx

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

func TestInt(t *testing.T) {
	t.Parallel()
	long := "1" + strings.Repeat("0", 5000) + "e-5000" // 1, spelled long
	tests := []struct {
		raw  string
		want int64
		err  error
	}{
		{"5000", 5000, nil},
		{"5000.0", 5000, nil},
		{"5e3", 5000, nil},
		{"5.0E+3", 5000, nil},
		{"5000.000", 5000, nil},
		{"50000e-1", 5000, nil},
		{"900000.0", 900000, nil},
		{"0", 0, nil},
		{"-0", 0, nil},
		{"-0.0", 0, nil},
		{"0e99999999999999999999", 0, nil},
		{"0.000e-400", 0, nil},
		{" 7 ", 7, nil},
		{"-32602.0", -32602, nil},
		{"9007199254740993", 9007199254740993, nil}, // not a float64
		{"9223372036854775807", math.MaxInt64, nil},
		{"9.223372036854775807e18", math.MaxInt64, nil},
		{"-9223372036854775808", math.MinInt64, nil},
		{"-9223372036854775808.000", math.MinInt64, nil},
		{long, 1, nil},
		{"9223372036854775808", 0, ErrIntRange},
		{"-9223372036854775809", 0, ErrIntRange},
		{"1e19", 0, ErrIntRange},
		{"99999999999999999999", 0, ErrIntRange},
		{"1e400", 0, ErrIntRange},
		{"-1e400", 0, ErrIntRange},
		{"1e99999999999999999999999", 0, ErrIntRange},
		{"5000.5", 0, ErrNotIntegral},
		{"0.5", 0, ErrNotIntegral},
		{"1e-3", 0, ErrNotIntegral},
		{"1e-99999999999999999999", 0, ErrNotIntegral},
		{"-1.0000000000000000000001", 0, ErrNotIntegral},
		{`"5000"`, 0, ErrNotNumber},
		{"null", 0, ErrNotNumber},
		{"", 0, ErrNotNumber},
		{"-", 0, ErrNotNumber},
		{"+5", 0, ErrNotNumber},
		{"05", 0, ErrNotNumber},
		{".5", 0, ErrNotNumber},
		{"5.", 0, ErrNotNumber},
		{"5e", 0, ErrNotNumber},
		{"5e+", 0, ErrNotNumber},
		{"0x10", 0, ErrNotNumber},
		{"Infinity", 0, ErrNotNumber},
		{"NaN", 0, ErrNotNumber},
		{"5 5", 0, ErrNotNumber},
		{"[5]", 0, ErrNotNumber},
	}
	for _, tt := range tests {
		name := tt.raw
		if len(name) > 30 {
			name = name[:30]
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Int([]byte(tt.raw))
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) || got != tt.want {
				t.Fatalf("Int(%s) = %d, %v; want %d, %v", tt.raw, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestClampInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw     string
		want    int64
		clamped bool
		err     error
	}{
		{"5000.0", 5000, false, nil},
		{"10", 50, true, nil},
		{"3600000", 10000, true, nil},
		{"1e400", 10000, true, nil},
		{"-1e400", 50, true, nil},
		{"5000.5", 0, false, ErrNotIntegral},
		{`"5000"`, 0, false, ErrNotNumber},
	}
	for _, tt := range tests {
		v, clamped, err := ClampInt([]byte(tt.raw), 50, 10000)
		if v != tt.want || clamped != tt.clamped || !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("ClampInt(%s) = %d, %v, %v; want %d, %v, %v", tt.raw, v, clamped, err, tt.want, tt.clamped, tt.err)
		}
	}
}

func TestIntegerFields(t *testing.T) {
	t.Parallel()
	var strict struct {
		TTLMs Integer `json:"ttlMs"`
		Poll  Integer `json:"pollIntervalMs"`
	}
	if err := json.Unmarshal([]byte(`{"ttlMs":900000.0,"pollIntervalMs":5e3}`), &strict); err != nil || strict.TTLMs != 900000 || strict.Poll != 5000 {
		t.Fatalf("strict decode = %+v, %v", strict, err)
	}
	err := json.Unmarshal([]byte(`{"ttlMs":1.5}`), &strict)
	var numErr *NumberError
	if !errors.As(err, &numErr) || !errors.Is(err, ErrNotIntegral) {
		t.Fatalf("strict decode of 1.5: %v, want a NumberError of ErrNotIntegral", err)
	}

	type answer struct {
		TaskID string         `json:"taskId"`
		Poll   LenientInteger `json:"pollIntervalMs"`
	}
	tests := []struct {
		body string
		want LenientInteger
		err  error
	}{
		{`{"taskId":"a","pollIntervalMs":5000.0}`, LenientInteger{Value: 5000, Set: true}, nil},
		{`{"taskId":"a"}`, LenientInteger{}, nil},
		{`{"taskId":"a","pollIntervalMs":null}`, LenientInteger{}, nil},
		{`{"taskId":"a","pollIntervalMs":1e400}`, LenientInteger{Value: math.MaxInt64, Set: true}, ErrIntRange},
		{`{"taskId":"a","pollIntervalMs":2.5}`, LenientInteger{}, ErrNotIntegral},
		{`{"taskId":"a","pollIntervalMs":"5000"}`, LenientInteger{}, ErrNotNumber},
		{`{"taskId":"a","pollIntervalMs":{"ms":5}}`, LenientInteger{}, ErrNotNumber},
	}
	for _, tt := range tests {
		var a answer
		if err := json.Unmarshal([]byte(tt.body), &a); err != nil || a.TaskID != "a" {
			t.Errorf("lenient decode of %s failed: %v (taskId %q)", tt.body, err, a.TaskID)
			continue
		}
		if a.Poll.Value != tt.want.Value || a.Poll.Set != tt.want.Set || !errors.Is(a.Poll.Err, tt.err) || (tt.err == nil && a.Poll.Err != nil) {
			t.Errorf("lenient decode of %s = %+v; want %+v with %v", tt.body, a.Poll, tt.want, tt.err)
		}
	}
}

// referenceInt decides what Int must answer for raw with encoding/json
// (is it a JSON number?) and math/big (is its exact value an integer, and
// within int64?). decided is false for spellings whose exact value is too
// costly to build (a huge exponent); those are left to TestInt.
type reference struct {
	v       int64
	err     error
	decided bool
}

func referenceInt(raw []byte) reference {
	s := strings.Trim(string(raw), " \t\r\n")
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return reference{0, ErrNotNumber, true} // json.Number also takes a quoted string
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return reference{0, ErrNotNumber, true}
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, good := new(big.Int).SetString(strings.TrimPrefix(s[i+1:], "+"), 10)
		if !good || e.CmpAbs(big.NewInt(2000)) > 0 {
			return reference{}
		}
	}
	r, good := new(big.Rat).SetString(n.String())
	if !good {
		panic("big.Rat refuses the JSON number " + s)
	}
	if !r.IsInt() {
		return reference{0, ErrNotIntegral, true}
	}
	if !r.Num().IsInt64() {
		return reference{0, ErrIntRange, true}
	}
	return reference{r.Num().Int64(), nil, true}
}

// FuzzInt checks Int against referenceInt, and ClampInt and the two field
// types against Int.
func FuzzInt(f *testing.F) {
	for _, seed := range []string{
		"5000", "5000.0", "900000.0", "5e3", "5.0E+3", "-0.0", "1e400", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "0.5", `"5"`, "05", "1e-3", "12.3400e2",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Int(raw)
		ref := referenceInt(raw)
		if ref.decided && (got != ref.v || !errors.Is(err, ref.err) || (ref.err == nil && err != nil)) {
			t.Fatalf("Int(%q) = %d, %v; the reference says %d, %v", raw, got, err, ref.v, ref.err)
		}
		if errors.Is(err, ErrIntRange) {
			if sign, neg := IntRangeSign(err), strings.HasPrefix(strings.TrimLeft(string(raw), " \t\r\n"), "-"); sign == 0 || (sign < 0) != neg {
				t.Fatalf("Int(%q): range error on side %d", raw, sign)
			}
		}
		v, clamped, cerr := ClampInt(raw, -1000, 1000)
		switch {
		case err == nil && (v != min(max(got, -1000), 1000) || clamped != (v != got) || cerr != nil):
			t.Fatalf("ClampInt(%q) = %d, %v, %v; Int says %d", raw, v, clamped, cerr, got)
		case errors.Is(err, ErrIntRange) && (!clamped || cerr != nil || (v != -1000 && v != 1000)):
			t.Fatalf("ClampInt(%q) = %d, %v, %v; Int says out of range", raw, v, clamped, cerr)
		case err != nil && !errors.Is(err, ErrIntRange) && (!errors.Is(cerr, err) || v != 0):
			t.Fatalf("ClampInt(%q) = %d, %v, %v; Int says %v", raw, v, clamped, cerr, err)
		}
		var lenient LenientInteger
		if lerr := lenient.UnmarshalJSON(raw); lerr != nil {
			t.Fatalf("LenientInteger.UnmarshalJSON(%q) failed: %v", raw, lerr)
		}
		var strict Integer
		serr := strict.UnmarshalJSON(raw)
		if string(trimSpace(raw)) != "null" && (err == nil) != (serr == nil) || (err == nil && int64(strict) != got) {
			t.Fatalf("Integer.UnmarshalJSON(%q) = %d, %v; Int says %d, %v", raw, strict, serr, got, err)
		}
	})
}
