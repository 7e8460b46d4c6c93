package jsonrpc

import (
	"encoding/json"
	"testing"
)

// RequestBytes builds the request by appending when encoding would change
// none of its bytes, and gives what json.Marshal gives either way.
func TestRequestBytesAsEncoded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id, method, params string
		appended                 bool
	}{
		{"plain call", `"mcp-tasks:abc:1"`, "tools/call", `{"name":"x","arguments":{"a":1}}`, true},
		{"number id", `7`, "tools/call", `{"name":"x"}`, true},
		{"notification", ``, "notifications/cancelled", `{"requestId":"g:1"}`, true},
		{"no params", `1`, "tools/list", ``, true},
		{"null id", `null`, "ping", `{}`, true},
		{"unicode kept", `1`, "tools/call", `{"name":"é日本"}`, true},
		{"escapes kept", `1`, "tools/call", `{"s":"a\"b\\c\u00e9"}`, true},
		{"html in params", `1`, "tools/call", `{"s":"<b>&"}`, false},
		{"spacing in params", `1`, "tools/call", `{ "name" : "x" }`, false},
		{"newline in params", `1`, "tools/call", "{\"name\":\n\"x\"}", false},
		{"line separator", `1`, "tools/call", "{\"s\":\"\u2028\"}", false},
		{"spaced id", `"a b"`, "tools/call", `{}`, false},
		{"method with a quote", `1`, `a"b`, `{}`, false},
		{"method with html", `1`, `a<b`, `{}`, false},
		{"non-ASCII method", `1`, `é`, `{}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := json.Marshal(Message{JSONRPC: "2.0", ID: json.RawMessage(tt.id), Method: tt.method, Params: json.RawMessage(tt.params)})
			got, err := RequestBytes(json.RawMessage(tt.id), tt.method, json.RawMessage(tt.params))
			if (err != nil) != (wantErr != nil) || string(got) != string(want) {
				t.Errorf("RequestBytes = %s, %v\nwant %s, %v", got, err, want, wantErr)
			}
			if _, ok := plainRequest(json.RawMessage(tt.id), tt.method, json.RawMessage(tt.params)); ok != tt.appended {
				t.Errorf("appended = %v, want %v", ok, tt.appended)
			}
		})
	}
}

// Invalid params are refused as json.Marshal refuses them.
func TestRequestBytesInvalidParams(t *testing.T) {
	t.Parallel()
	for _, params := range []string{`{"a":}`, `{"a":1`, `nul`, `{"a":1}x`} {
		if data, err := RequestBytes(json.RawMessage(`1`), "tools/call", json.RawMessage(params)); err == nil {
			t.Errorf("params %s encoded as %s, want an error", params, data)
		}
	}
}

// FuzzRequestBytes holds the appended request to json.Marshal's, byte for
// byte, whenever it is taken.
func FuzzRequestBytes(f *testing.F) {
	f.Add(`"mcp-tasks:abc:1"`, "tools/call", `{"name":"x","arguments":{"a":[1,2.5e3,true,null]}}`)
	f.Add(`1`, "notifications/cancelled", `{"requestId":"\u00e9\ud83d\ude00"}`)
	f.Add(``, "x", "{\"a\":\"\xff\"}")
	f.Fuzz(func(t *testing.T, id, method, params string) {
		got, ok := plainRequest(json.RawMessage(id), method, json.RawMessage(params))
		if !ok {
			return
		}
		want, err := json.Marshal(Message{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: json.RawMessage(params)})
		if err != nil {
			t.Fatalf("appended %s where json.Marshal fails: %v", got, err)
		}
		if string(got) != string(want) {
			t.Fatalf("appended %s\nencoded  %s", got, want)
		}
	})
}
