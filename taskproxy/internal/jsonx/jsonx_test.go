package jsonx

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestSetMember(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, obj, key, value, want string
	}{
		{"append", `{"a":1}`, "b", `2`, `{"a":1,"b":2}`},
		{"empty object", `{ }`, "b", `true`, `{ "b":true}`},
		{"replace keeps layout", `{ "a" : [1, 2],  "b": "x\"}" }`, "a", `null`, `{ "a" : null,  "b": "x\"}" }`},
		{"escaped key", `{"a\u0062":1}`, "ab", `2`, `{"a\u0062":2}`},
		{"nested braces in strings", `{"s":"{[","n":{"m":[{}]}}`, "z", `0`, `{"s":"{[","n":{"m":[{}]},"z":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Set([]byte(tt.obj), tt.key, []byte(tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("result is not valid JSON: %s", got)
			}
		})
	}
}

func TestDeleteMember(t *testing.T) {
	t.Parallel()
	tests := []struct{ obj, key, want string }{
		{`{"a":1,"task":{"ttl":5},"b":2}`, "task", `{"a":1,"b":2}`},
		{`{"a":1,"task":{}}`, "task", `{"a":1}`},
		{`{"task":{}, "a":1}`, "task", `{"a":1}`},
		{`{"task":{}}`, "task", `{}`},
		{`{"a":1}`, "task", `{"a":1}`},
	}
	for _, tt := range tests {
		got, err := Delete([]byte(tt.obj), tt.key)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("Delete(%s, %s) = %s, want %s", tt.obj, tt.key, got, tt.want)
		}
	}
}

func TestSetPath(t *testing.T) {
	t.Parallel()
	tests := []struct{ obj, want string }{
		{`{}`, `{"_meta":{"k":{"taskId":"t"}}}`},
		{`{"_meta":{"x":1}}`, `{"_meta":{"x":1,"k":{"taskId":"t"}}}`},
		{`{"_meta":null,"c":[]}`, `{"_meta":{"k":{"taskId":"t"}},"c":[]}`},
	}
	for _, tt := range tests {
		got, err := SetPath([]byte(tt.obj), []string{"_meta", "k"}, []byte(`{"taskId":"t"}`))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("SetPath(%s) = %s, want %s", tt.obj, got, tt.want)
		}
	}
}

func TestMalformedJSON(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":}`, `{"a":1`, `{"a":"x}`, `{1:2}`} {
		if _, err := Set([]byte(bad), "k", []byte(`1`)); err == nil {
			t.Errorf("Set(%q) accepted malformed JSON", bad)
		}
	}
}

func TestArrayElements(t *testing.T) {
	t.Parallel()
	in := []byte(`[ {"name":"a"}, "s,]", 3 ,[1,[2]] ]`)
	spans, err := ArrayElements(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range spans {
		got = append(got, string(in[s[0]:s[1]]))
	}
	want := []string{`{"name":"a"}`, `"s,]"`, `3`, `[1,[2]]`}
	if len(got) != len(want) {
		t.Fatalf("elements = %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("element %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// FuzzEqualFold checks EqualFold against bytes.EqualFold.
func FuzzEqualFold(f *testing.F) {
	f.Add([]byte("jsonrpc"), "jsonrpc")
	f.Add([]byte("j\u017fonrpc"), "jsonrpc")
	f.Add([]byte("tas\u212aId"), "taskId")
	f.Add([]byte("\xff"), "\ufffd")
	f.Fuzz(func(t *testing.T, b []byte, s string) {
		if got, want := EqualFold(b, s), bytes.EqualFold(b, []byte(s)); got != want {
			t.Fatalf("EqualFold(%q, %q) = %v, bytes.EqualFold %v", b, s, got, want)
		}
	})
}

func TestDeleteIn(t *testing.T) {
	t.Parallel()
	ours := func(k string) bool { return len(k) > 3 && k[:3] == "io/" }
	tests := []struct{ name, in, want string }{
		{"some dropped", `{"a":1,"_meta":{"io/x":1,"k":2},"b":2}`, `{"a":1,"_meta":{"k":2},"b":2}`},
		{"all dropped", `{"a":1,"_meta":{"io/x":1,"io/y":2}}`, `{"a":1}`},
		{"empty parent", `{"_meta":{},"a":1}`, `{"a":1}`},
		{"none dropped", `{"_meta":{"k":1}}`, `{"_meta":{"k":1}}`},
		{"no parent", `{"a":1}`, `{"a":1}`},
		{"parent not an object", `{"_meta":[1]}`, `{"_meta":[1]}`},
		{"escaped key", `{"_meta":{"io\/x":1,"k":2}}`, `{"_meta":{"k":2}}`},
	}
	for _, tt := range tests {
		got, err := DeleteIn([]byte(tt.in), "_meta", ours)
		if err != nil || string(got) != tt.want {
			t.Errorf("%s: DeleteIn(%s) = %s, %v; want %s", tt.name, tt.in, got, err, tt.want)
		}
	}
}
