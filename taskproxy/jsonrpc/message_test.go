package jsonrpc

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestParseMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                          string
		in                            string
		wantErr                       bool
		request, notification, answer bool
		method                        string
	}{
		{name: "request", in: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, request: true, method: "tools/call"},
		{name: "string id", in: ` {"jsonrpc":"2.0","id":"a","method":"ping"}`, request: true, method: "ping"},
		{name: "notification", in: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`, notification: true, method: "notifications/cancelled"},
		{name: "null id is a notification", in: `{"jsonrpc":"2.0","id":null,"method":"x"}`, notification: true, method: "x"},
		{name: "result", in: `{"jsonrpc":"2.0","id":7,"result":{}}`, answer: true},
		{name: "error", in: `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`, answer: true},
		{name: "batch", in: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, wantErr: true},
		{name: "wrong version", in: `{"jsonrpc":"1.0","id":1,"method":"ping"}`, wantErr: true},
		// Read as the upstream reads them: an escaped version is the version,
		// and a byte order mark is dropped by readers that decode text first.
		{name: "escaped version", in: `{"jsonrpc":"2\u002e0","id":1,"method":"tasks/list"}`, request: true, method: "tasks/list"},
		{name: "escaped wrong version", in: `{"jsonrpc":"1\u002e0","id":1,"method":"ping"}`, wantErr: true},
		{name: "version not a string", in: `{"jsonrpc":2.0,"id":1,"method":"ping"}`, wantErr: true},
		{name: "byte order mark", in: "\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`, request: true, method: "tasks/get"},
		{name: "not json", in: `hello`, wantErr: true},
		{name: "truncated", in: `{"jsonrpc":"2.0","id":1,`, wantErr: true},
		{name: "empty", in: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := Parse([]byte(tt.in))
			if tt.wantErr {
				if err == nil || !errors.Is(err, ErrNotJSONRPC) {
					t.Fatalf("Parse(%q) err = %v, want ErrNotJSONRPC", tt.in, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if m.IsRequest() != tt.request || m.IsNotification() != tt.notification || m.IsResponse() != tt.answer {
				t.Errorf("kinds = request %v notification %v response %v, want %v %v %v",
					m.IsRequest(), m.IsNotification(), m.IsResponse(), tt.request, tt.notification, tt.answer)
			}
			if m.Method != tt.method {
				t.Errorf("method = %q, want %q", m.Method, tt.method)
			}
		})
	}
}

func TestEncoders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		got  func() ([]byte, error)
		want string
	}{
		{"result", func() ([]byte, error) { return ResponseBytes(json.RawMessage(`3`), map[string]int{"a": 1}) },
			`{"jsonrpc":"2.0","id":3,"result":{"a":1}}`},
		{"raw result kept", func() ([]byte, error) {
			return ResponseBytes(json.RawMessage(`"x"`), json.RawMessage(`{"b":2,"a":1}`))
		},
			`{"jsonrpc":"2.0","id":"x","result":{"b":2,"a":1}}`},
		{"error with null id", func() ([]byte, error) {
			return ErrorBytes(nil, Errorf(CodeInvalidParams, "bad %s", "cursor")), nil
		},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"bad cursor"}}`},
		{"notification", func() ([]byte, error) {
			return RequestBytes(nil, "notifications/cancelled", map[string]int{"requestId": 4})
		},
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}`},
		{"request", func() ([]byte, error) {
			return RequestBytes(json.RawMessage(`"g:1"`), "tools/call", json.RawMessage(`{"name":"x"}`))
		},
			`{"jsonrpc":"2.0","id":"g:1","method":"tools/call","params":{"name":"x"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.got()
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestInputIDs(t *testing.T) {
	t.Parallel()
	id := InputID("abc_-12", "7")
	task, key, ok := ParseInputID(id)
	if !ok || task != "abc_-12" || key != "7" {
		t.Fatalf("ParseInputID(%s) = %q %q %v", id, task, key, ok)
	}
	for _, bad := range []string{`7`, `"x"`, `"mcp-tasks:t:call:1"`, `"mcp-tasks::input:1"`, `"mcp-tasks:t:input:"`} {
		if _, _, ok := ParseInputID(json.RawMessage(bad)); ok {
			t.Errorf("ParseInputID(%s) accepted", bad)
		}
	}
	if !IsGatewayID(UpstreamCallID("t", 1)) || IsGatewayID(json.RawMessage(`"other"`)) {
		t.Error("IsGatewayID misjudges ids")
	}
}

// ResponseRaw builds the bytes ResponseBytes encodes, for every id.
func TestResponseRaw(t *testing.T) {
	t.Parallel()
	result := []byte(`{"taskId":"a","status":"completed"}`)
	for _, id := range []string{``, `null`, `1`, `-1.5e3`, `"a"`, `"a<b>&c"`, `"\u2028"`, "\"\u2028\"", `"é"`} {
		want, err := ResponseBytes(json.RawMessage(id), json.RawMessage(result))
		if err != nil {
			t.Fatal(err)
		}
		if got := ResponseRaw(json.RawMessage(id), result); string(got) != string(want) {
			t.Errorf("id %s:\n got %s\nwant %s", id, got, want)
		}
		// Appended to a buffer in use, it keeps what the buffer held.
		if got := AppendResponseRaw([]byte("held"), json.RawMessage(id), result); string(got) != "held"+string(want) {
			t.Errorf("appended, id %s:\n got %s\nwant held%s", id, got, want)
		}
		// ResponseBytes of a value it encodes, against encoding it twice.
		value := map[string]any{"a": "<b>&\u2028", "n": 1, "nil": nil}
		raw, _ := json.Marshal(value)
		want, _ = json.Marshal(Message{JSONRPC: "2.0", ID: orNull(json.RawMessage(id)), Result: raw})
		if got, err := ResponseBytes(json.RawMessage(id), value); err != nil || string(got) != string(want) {
			t.Errorf("ResponseBytes, id %s:\n got %s, %v\nwant %s", id, got, err, want)
		}
	}
}

// An error code is read as JSON Schema reads an integer: runtimes that
// keep numbers as floats write -32602.0.
func TestParseErrorCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code    string
		want    int
		wantErr bool
	}{
		{`-32602`, CodeInvalidParams, false},
		{`-32602.0`, CodeInvalidParams, false},
		{`-3.2603e4`, CodeInternalError, false},
		{`null`, 0, false},
		{`-32602.5`, 0, true},
		{`1e400`, 0, true},
		{`"-32602"`, 0, true},
	}
	for _, tt := range tests {
		in := `{"jsonrpc":"2.0","id":7,"error":{"code":` + tt.code + `,"message":"no","data":{"k":1}}}`
		m, err := Parse([]byte(in))
		switch {
		case tt.wantErr:
			if err == nil {
				t.Errorf("Parse with code %s = %+v, want an error", tt.code, m.Error)
			}
		case err != nil:
			t.Errorf("Parse with code %s: %v", tt.code, err)
		case m.Error == nil || m.Error.Code != tt.want || m.Error.Message != "no" || string(m.Error.Data) != `{"k":1}`:
			t.Errorf("Parse with code %s = %+v, want code %d", tt.code, m.Error, tt.want)
		}
	}
}
