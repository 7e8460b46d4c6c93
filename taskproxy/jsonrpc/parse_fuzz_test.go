package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// readableSeeds are messages as real clients send them, and the spellings
// that made the gateway and an upstream read one body differently.
var readableSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`,
	`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":3},"task":{"ttl":60000}}}`,
	`{"jsonrpc":"2.0","id":"a","method":"tasks/get","params":{"taskId":"abc","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","id":"mcp-tasks:t:input:k","result":{"action":"accept","content":{}}}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"no"}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}x`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`,
	`{"j\u017fonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
	"{\"j\u017fonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\"}",
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"safe","NAME":"dangerous"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","task":{},"task":{"ttl":1}}}`,
	`{"jsonrpc":"2\u002e0","id":1,"method":"tasks/list"}`,
	"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
}

// envelope is the JSON-RPC envelope as Go's encoding/json reads it, the way
// go-sdk and mcp-go read what the gateway passes on.
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
}

// FuzzParseMessage checks Parse against encoding/json: what it
// accepts, encoding/json decodes to the same version, id, method and params;
// what encoding/json reads as one JSON-RPC request object, Parse
// accepts unless a member it reads is named twice or in another case.
func FuzzParseMessage(f *testing.F) {
	for _, s := range readableSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		body := bytes.TrimPrefix(data, utf8BOM)
		var env envelope
		decodeErr := json.Unmarshal(body, &env)
		if err != nil {
			if decodeErr == nil && env.JSONRPC != nil && *env.JSONRPC == "2.0" && len(env.Method) > 0 && env.Method[0] == '"' &&
				(len(env.ID) == 0 || checkID(env.ID) == nil) && !errors.Is(err, errAmbiguousMember) && utf8.Valid(body) {
				t.Fatalf("Parse(%q) = %v, but encoding/json reads a JSON-RPC message", data, err)
			}
			return
		}
		if decodeErr != nil {
			t.Fatalf("Parse(%q) accepted what encoding/json refuses: %v", data, decodeErr)
		}
		if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
			t.Fatalf("Parse(%q) accepted version %v", data, env.JSONRPC)
		}
		if !bytes.Equal(m.ID, env.ID) || !bytes.Equal(m.Params, env.Params) {
			t.Fatalf("Parse(%q): id %s params %s; encoding/json: id %s params %s", data, m.ID, m.Params, env.ID, env.Params)
		}
		var method string
		if len(env.Method) > 0 {
			if err := json.Unmarshal(env.Method, &method); err != nil {
				t.Fatalf("Parse(%q) accepted method %s", data, env.Method)
			}
		}
		if m.Method != method {
			t.Fatalf("Parse(%q): method %q; encoding/json %q", data, m.Method, method)
		}
	})
}
