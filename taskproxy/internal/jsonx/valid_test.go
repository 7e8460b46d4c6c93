package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are bodies on each side of JSON's grammar, and of
// encoding/json's nesting limit.
var validCases = []string{
	``, ` `, `{}`, ` {} `, `[]`, `[ ]`, `{ }`, `null`, `true`, `false`, `nul`, `nullx`, `truefalse`, `True`,
	`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-05`, `1e`, `1e+`, `-1.5e3`, `+1`, `0x10`, `1.5.5`,
	`"a"`, `"`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00G9"`, `"\u12"`, `"\x41"`, `"tab	here"`, "\"nl\nhere\"",
	"\"\xff\xfe invalid utf-8\"", `"é"`,
	`{"a":1}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":[1,2,{"b":null}]}`,
	`[1,2]`, `[1,,2]`, `[1 2]`, `[,]`, `[1]]`, `[[1]`, `{"a":1}}`, `{"a":1}{"b":2}`, `{"a":1} x`,
	"\t\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"x\"}}\r\n",
	"\v{}", "\u00a0{}", "{}\x00",
	strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth),
	strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
	strings.Repeat(`{"a":`, maxDepth) + "1" + strings.Repeat("}", maxDepth),
	strings.Repeat(`{"a":`, maxDepth+1) + "1" + strings.Repeat("}", maxDepth+1),
}

// Valid agrees with encoding/json.Valid.
func TestValid(t *testing.T) {
	t.Parallel()
	for _, in := range validCases {
		if got, want := Valid([]byte(in)), json.Valid([]byte(in)); got != want {
			name := in
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			t.Errorf("Valid(%q) = %v, encoding/json says %v", name, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, in := range validCases {
		if len(in) < 1000 {
			f.Add([]byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json says %v", data, got, want)
		}
		checkValidObject(t, data)
	})
}

// objectCases are objects, and bodies that start as one, on each side of
// the grammar, with members of every kind of value.
var objectCases = []string{
	`{"a":1,"b":"x","c":[1,{"d":null}],"e":{"f":true},"g":-1.5e3}`, ` { "a" : 1 , "b" : [ ] } `, `{"a":1,"a":2}`,
	`{"a\u0062":{}}`, `{"a":1,"b":}`, `{"a":1,"b":2`, `{"a":1,"b":2}]`, `{"a":1,"b":2},`, `{"a":1,"b":"\x"}`, `{"a":1,"b":01}`,
	`{"a":1,"b"}`, `{"a":1,"b":2 "c":3}`, `{"a":1}` + "\x00", `{"a":[1,2,]}`, "{\"a\":\"\n\"}", `{1:2}`, `{"a":1,}`,
	`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`,
}

// ValidObject agrees with Valid on objects, refuses everything else, and
// hands fn the members EachMember finds, in order.
func TestValidObject(t *testing.T) {
	t.Parallel()
	for _, in := range append(append([]string(nil), validCases...), objectCases...) {
		checkValidObject(t, []byte(in))
	}
}

// checkValidObject checks ValidObject on data against Valid and EachMember,
// and that it stops calling fn once fn returns false without stopping the
// check.
func checkValidObject(t *testing.T, data []byte) {
	t.Helper()
	var got []Member
	valid := ValidObject(data, func(m Member) bool { got = append(got, m); return true })
	i := SkipSpace(data, 0)
	isObject := i < len(data) && data[i] == '{'
	if want := Valid(data) && isObject; valid != want {
		t.Fatalf("ValidObject(%q) = %v, Valid of an object says %v", data, valid, want)
	}
	if !valid {
		return
	}
	var want []Member
	if _, err := EachMember(data, func(m Member) bool { want = append(want, m); return true }); err != nil {
		t.Fatalf("EachMember(%q): %v", data, err)
	}
	if len(got) != len(want) {
		t.Fatalf("ValidObject(%q) saw %d members, EachMember %d", data, len(got), len(want))
	}
	for k := range got {
		if got[k] != want[k] {
			t.Fatalf("ValidObject(%q): member %d at %+v, EachMember %+v", data, k, got[k], want[k])
		}
	}
	calls := 0
	if !ValidObject(data, func(Member) bool { calls++; return false }) || calls != min(len(want), 1) {
		t.Fatalf("ValidObject(%q) with fn done at once: %d calls, want %d, and the body still valid", data, calls, min(len(want), 1))
	}
}

// Valid reads a request body in one pass, allocating nothing.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestValidAllocs(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":1.5e0,"label":"x\u00e9","list":[true,false,null]}}}`)
	if n := testing.AllocsPerRun(50, func() {
		if !Valid(body) {
			t.Fatal("a valid body refused")
		}
	}); n != 0 {
		t.Errorf("%.0f allocations, want none", n)
	}
}

func BenchmarkValid(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":1,"label":"x"},"_meta":{"progressToken":"p"},"task":{"ttl":60000}}}`)
	b.Run("jsonx", func(b *testing.B) {
		for b.Loop() {
			Valid(body)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(body)
		}
	})
}
