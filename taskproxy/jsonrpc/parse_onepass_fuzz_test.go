package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// parseIntoTwoPass is ParseInto as it read a body before validating and
// reading the envelope in one pass: jsonx.Valid over the whole body, then
// jsonx.EachMember over the object. The one-pass reading must refuse,
// accept and read exactly what this did.
func parseIntoTwoPass(m *Message, data []byte) error {
	data = bytes.TrimPrefix(data, utf8BOM)
	if !jsonx.Valid(data) {
		return ErrMalformedJSON
	}
	data = data[jsonx.SkipSpace(data, 0):]
	switch data[0] {
	case '{':
	case '[':
		return errBatch
	default:
		return errNotObject
	}
	*m = Message{}
	var version, method, rpcErr []byte
	var seen [len(envelopeMembers)]bool
	ambiguous := false
	if _, err := jsonx.EachMember(data, func(mem jsonx.Member) bool {
		v := data[mem.ValueStart:mem.ValueEnd]
		i := envelopeMember(data, mem)
		switch {
		case i < 0:
			return true
		case i >= len(envelopeMembers) || seen[i]:
			ambiguous = true
			return false
		}
		seen[i] = true
		switch envelopeMembers[i] {
		case "jsonrpc":
			version = v
		case "id":
			m.ID = v
		case "method":
			method = v
		case "params":
			m.Params = v
		case "result":
			m.Result = v
		case "error":
			rpcErr = v
		}
		return true
	}); err != nil {
		return ErrMalformedJSON
	}
	if ambiguous {
		return errAmbiguousMember
	}
	if string(version) != `"2.0"` && (len(version) == 0 || version[0] != '"' || jsonx.Unquote(version) != "2.0") {
		return errVersion
	}
	if err := checkID(m.ID); err != nil {
		return err
	}
	if method != nil {
		if method[0] != '"' {
			return errMethodType
		}
		m.Method = methodName(method)
	}
	m.JSONRPC = "2.0"
	if rpcErr != nil && string(rpcErr) != "null" {
		if err := json.Unmarshal(rpcErr, &m.Error); err != nil {
			return errErrorMember
		}
	}
	if string(m.Result) == "null" && m.Error != nil {
		m.Result = nil
	}
	return nil
}

// onePassSeeds are bodies on each edge the one-pass reading could move:
// the error code (-32700 or -32600) when a flaw and a refused envelope
// meet, members named twice before or after a flaw, escapes in keys,
// nesting at the depth limit, bytes around the value, a byte order mark,
// invalid UTF-8 and numbers past any float.
var onePassSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call",}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call"} x`,
	`{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","\u006dethod":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"m\u0065thod":"ping","params":{"a":[}}`,
	`{"jsonrpc":"1.0","id":1,"method":"ping"`,
	`{"jsonrpc":"2.0","id":{},"method":"ping"}`,
	`{"jsonrpc":"2.0","id":{},"method":"ping"}}`,
	`{"jsonrpc":"2.0","id":1,"method":7}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"},"result":null}`,
	`{"jsonrpc":"2.0","id":1e999999,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":-0.0e-0,"method":"ping"}`,
	`{"jsonrpc":"2.0","id":00,"method":"ping"}`,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"p\xc3\"}",
	"\xef\xbb\xbf\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
	"\xef\xbb\xbf [1]",
	" \t\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} \t\r\n",
	"\v{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
	`{}`, `{} `, `{`, `}`, ``, ` `, `[`, `[}`, `"x"`, `1`, `null`, `{"a"}`, `{"a":}`, `{,}`, `{"a":1,,"b":2}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"x","params":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`,
}

// FuzzParseIntoOnePass checks the one-pass ParseInto against the two-pass
// reading it replaced: the same error (so the same code and message), and
// for an accepted body the same version, id, method, params, result and
// error.
func FuzzParseIntoOnePass(f *testing.F) {
	for _, s := range append(append([]string(nil), readableSeeds...), onePassSeeds...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkOnePass(t, data)
	})
}

// The seeds, run as a plain test too, without the fuzzing engine.
func TestParseIntoOnePassSeeds(t *testing.T) {
	t.Parallel()
	for _, s := range append(append([]string(nil), readableSeeds...), onePassSeeds...) {
		checkOnePass(t, []byte(s))
	}
}

func checkOnePass(t *testing.T, data []byte) {
	t.Helper()
	var got, want Message
	gotErr := ParseInto(&got, data)
	wantErr := parseIntoTwoPass(&want, data)
	if gotErr != wantErr { //nolint:errorlint // the very same *ReadError, which fixes its code and message
		t.Fatalf("ParseInto(%.200q) = %v, the two-pass reading %v", data, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if g, w := describeMessage(&got), describeMessage(&want); g != w {
		t.Fatalf("ParseInto(%.200q) read %s, the two-pass reading %s", data, g, w)
	}
}

func describeMessage(m *Message) string {
	e := "<nil>"
	if m.Error != nil {
		e = fmt.Sprintf("%+v", *m.Error)
	}
	return fmt.Sprintf("version %q id %q method %q params %q result %q error %s", m.JSONRPC, m.ID, m.Method, m.Params, m.Result, e)
}
