package jsonx

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"unicode/utf8"
)

// uniqueObject decodes obj as an object whose keys are all distinct, even
// under encoding/json's case folding (the edits act on the first member of a
// name, decoders on the last; the gateway refuses ambiguous keys where it
// reads them).
func uniqueObject(obj []byte) (map[string]any, bool) {
	if !json.Valid(obj) {
		return nil, false
	}
	var keys []string
	if _, err := EachMember(obj, func(m Member) bool {
		var k string
		if json.Unmarshal(obj[m.KeyStart:m.KeyEnd], &k) != nil {
			return false
		}
		keys = append(keys, k)
		return true
	}); err != nil {
		return nil, false
	}
	for i := range keys {
		for j := range i {
			if EqualFold([]byte(keys[i]), keys[j]) {
				return nil, false
			}
		}
	}
	var m map[string]any
	if json.Unmarshal(obj, &m) != nil {
		return nil, false
	}
	return m, true
}

// FuzzEdit checks Set and Delete against encoding/json: the output is valid
// JSON, decodes to the input with just that member changed, and keeps the
// input's bytes before the edited member.
func FuzzEdit(f *testing.F) {
	f.Add([]byte(`{"capabilities":{"tools":{}},"protocolVersion":"2025-11-25"}`), "tasks", []byte(`{"list":{}}`))
	f.Add([]byte(`{"a":1,"b":[1,2,{"c":"\u00e9"}]}`), "b", []byte(`null`))
	f.Add([]byte(` { } `), "k", []byte(`"v"`))
	f.Add([]byte(`{"_meta":{"x":1},"content":[]}`), "_meta", []byte(`{}`))
	f.Fuzz(func(t *testing.T, obj []byte, key string, value []byte) {
		before, ok := uniqueObject(obj)
		if !ok || !json.Valid(value) || !utf8.ValidString(key) {
			return // the gateway's keys are its own constants, valid UTF-8
		}
		var want any
		if json.Unmarshal(value, &want) != nil {
			return
		}
		for k := range before {
			if k != key && EqualFold([]byte(k), key) {
				return // another spelling of key: ambiguous, refused upstream of here
			}
		}
		set, err := Set(obj, key, value)
		if err != nil {
			t.Fatalf("Set(%s, %q, %s): %v", obj, key, value, err)
		}
		after, ok := uniqueObject(set)
		if !ok {
			t.Fatalf("Set(%s, %q, %s) = %s: not a valid object of unique keys", obj, key, value, set)
		}
		expect := map[string]any{}
		maps.Copy(expect, before)
		expect[key] = want
		if !reflect.DeepEqual(after, expect) {
			t.Fatalf("Set(%s, %q, %s) = %s, decodes to %v, want %v", obj, key, value, set, after, expect)
		}
		if m, found, _, _, _ := FindMember(obj, key); found && !bytes.HasPrefix(set, obj[:m.ValueStart]) {
			t.Fatalf("Set(%s, %q, %s) = %s changed bytes before the member", obj, key, value, set)
		}

		del, err := Delete(obj, key)
		if err != nil {
			t.Fatalf("Delete(%s, %q): %v", obj, key, err)
		}
		gone, ok := uniqueObject(del)
		if !ok {
			t.Fatalf("Delete(%s, %q) = %s: not a valid object", obj, key, del)
		}
		delete(expect, key)
		for k, v := range before {
			if k != key {
				expect[k] = v
			}
		}
		if !reflect.DeepEqual(gone, expect) {
			t.Fatalf("Delete(%s, %q) = %s, decodes to %v, want %v", obj, key, del, gone, expect)
		}
	})
}
