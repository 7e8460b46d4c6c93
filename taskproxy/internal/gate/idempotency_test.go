package gate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestIdempotencyOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, params string
		wantKey              bool
	}{
		{"header", "abc", `{"name":"t","arguments":{"a":1}}`, true},
		{"meta", "", `{"name":"t","arguments":{"a":1},"_meta":{"io.modelcontextprotocol/idempotency-key":"abc"}}`, true},
		{"none", "", `{"name":"t","arguments":{"a":1}}`, false},
	}
	var keys, prints []string
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
		if tt.header != "" {
			r.Header.Set("Idempotency-Key", tt.header)
		}
		key, fp := IdempotencyOf(r, json.RawMessage(tt.params))
		if (key != "") != tt.wantKey {
			t.Errorf("%s: key %q", tt.name, key)
		}
		if key != "" {
			keys, prints = append(keys, key), append(prints, fp)
		}
	}
	if keys[0] != keys[1] || prints[0] != prints[1] {
		t.Error("header and meta keys for the same call differ")
	}
	withKey := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{}`))
		r.Header.Set("Idempotency-Key", "k")
		return r
	}
	a, _ := IdempotencyOf(withKey(), json.RawMessage(`{"name":"t","arguments":{"a":1,"b":[1,2]}}`))
	_, fa := IdempotencyOf(withKey(), json.RawMessage(`{"name":"t","arguments":{"a":1,"b":[1,2]}}`))
	_, fb := IdempotencyOf(withKey(), json.RawMessage(`{"arguments":{ "b":[1, 2], "a":1 },"name":"t"}`))
	_, fc := IdempotencyOf(withKey(), json.RawMessage(`{"name":"t","arguments":{"a":2,"b":[1,2]}}`))
	_, fd := IdempotencyOf(withKey(), json.RawMessage(`{"name":"u","arguments":{"a":1,"b":[1,2]}}`))
	if a == "" || fa != fb {
		t.Error("the same arguments written differently fingerprint differently")
	}
	if fa == fc || fa == fd {
		t.Error("other arguments or another tool fingerprint the same")
	}
}

func TestCanonicalJSONExactNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, a, b string
		same       bool
	}{
		{"beyond float64 precision", `{"n":9007199254740993}`, `{"n":9007199254740992}`, false},
		{"long decimals", `{"n":0.10000000000000000001}`, `{"n":0.1}`, false},
		{"key order and spacing", `{"b":[1, 2],"a":9007199254740993}`, `{"a":9007199254740993,"b":[1,2]}`, true},
		{"nested", `{"x":{"z":1,"y":"s"}}`, `{ "x" : { "y":"s", "z":1 } }`, true},
		{"trailing data kept raw", `{"n":1} {"n":2}`, `{"n":1}`, false},
	}
	for _, tt := range tests {
		if got := CanonicalJSON(json.RawMessage(tt.a)) == CanonicalJSON(json.RawMessage(tt.b)); got != tt.same {
			t.Errorf("%s: canonical forms equal = %v, want %v (%s / %s)", tt.name, got, tt.same,
				CanonicalJSON(json.RawMessage(tt.a)), CanonicalJSON(json.RawMessage(tt.b)))
		}
	}
}
