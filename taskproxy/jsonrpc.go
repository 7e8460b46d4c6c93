package taskproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// JSON-RPC and MCP error codes the gateway answers with.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	// CodeTooManyTasks is ours, from the implementation-defined range
	// -32000..-32019 that both protocol eras leave open.
	CodeTooManyTasks = -32000
	// CodeSessionNotFound answers a 2025-11-25 session id the caller may
	// not use, as the TypeScript SDK answers an unknown one.
	CodeSessionNotFound = -32001
	// CodeRateLimited answers task operations over the rate limit (HTTP 429).
	CodeRateLimited = -32005

	CodeHeaderMismatch                  = -32020
	CodeMissingRequiredClientCapability = -32021
	CodeUnsupportedProtocolVersion      = -32022
)

// Message is one JSON-RPC 2.0 message: a request (Method and ID), a
// notification (Method only) or a response (ID with Result or Error). Raw
// parts stay raw so that whatever the gateway passes on keeps its bytes.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// Errorf returns a JSON-RPC error with a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// HasID reports whether the message carries a non-null id.
func (m *Message) HasID() bool { return len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) }

// IsRequest reports whether the message is a request (method and id).
func (m *Message) IsRequest() bool { return m.Method != "" && m.HasID() }

// IsNotification reports whether the message is a notification (method, no id).
func (m *Message) IsNotification() bool { return m.Method != "" && !m.HasID() }

// IsResponse reports whether the message is a response (id, no method).
func (m *Message) IsResponse() bool {
	return m.Method == "" && m.HasID() && (m.Result != nil || m.Error != nil)
}

// errNotJSONRPC is the root of every reason ParseMessage refuses a body.
var errNotJSONRPC = errors.New("not a JSON-RPC 2.0 message")

// readError is a body ParseMessage refused, with the JSON-RPC error the
// gateway answers it with: the gateway is fail-closed, so what it cannot read
// exactly as the upstream's JSON reader will is refused, never passed on
// unread (an upstream SDK could run what the gateway's tool modes, quota,
// task table and audit log never saw).
type readError struct {
	code   int
	reason string
}

func (e *readError) Error() string { return errNotJSONRPC.Error() + ": " + e.reason }

// Unwrap makes every readError an errNotJSONRPC.
func (e *readError) Unwrap() error { return errNotJSONRPC }

// rpcError is the JSON-RPC error answering e.
func (e *readError) rpcError() *Error {
	prefix := "Invalid Request: "
	if e.code == CodeParseError {
		prefix = "Parse error: "
	}
	return Errorf(e.code, "%s%s", prefix, e.reason)
}

// The reasons a body is refused. Batches left the protocol in 2025-06-18, and
// SDKs that still run them would run each element unseen by the gateway.
var (
	errMalformedJSON   = &readError{CodeParseError, "the body is not one valid JSON value"}
	errBatch           = &readError{CodeInvalidRequest, "batches are not supported: send one JSON-RPC message per request"}
	errNotObject       = &readError{CodeInvalidRequest, "the body is not a JSON-RPC message object"}
	errVersion         = &readError{CodeInvalidRequest, `"jsonrpc" must be "2.0"`}
	errMethodType      = &readError{CodeInvalidRequest, "the method must be a string"}
	errErrorMember     = &readError{CodeInvalidRequest, "the error member is not a JSON-RPC error object"}
	errInvalidID       = &readError{CodeInvalidRequest, "the id must be a string or a number"}
	errAmbiguousMember = &readError{CodeInvalidRequest, "a member of the message appears twice or in another case"}
)

// checkID checks a raw id, already known to be valid JSON: a string, a
// number or null (or absent).
func checkID(id []byte) error {
	if len(id) == 0 {
		return nil
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9', string(id) == "null":
		return nil
	}
	return errInvalidID
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte order mark.
var utf8BOM = []byte("\xef\xbb\xbf")

// envelopeMembers are the members of a JSON-RPC message.
var envelopeMembers = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// envelopeMember returns the index of mem's key in envelopeMembers, -1
// when it is none of them, or len(envelopeMembers) when it is one of them
// in another case (Unicode simple folding, as Go's encoding/json matches
// keys: "jſonrpc" with U+017F is "jsonrpc" to an upstream in Go).
func envelopeMember(obj []byte, mem jsonx.Member) int {
	exact, folded := jsonx.MatchKey(obj, mem, envelopeMembers[:])
	switch {
	case exact >= 0:
		return exact
	case folded:
		return len(envelopeMembers)
	}
	return -1
}

// ParseMessage reads one JSON-RPC 2.0 message, exactly as Go's encoding/json
// (and the other readers MCP SDKs use) would: the body is one valid JSON
// value with nothing after it but whitespace, and a member of the envelope
// named twice or in another case is refused rather than guessed at. Anything
// else is refused with a *readError (an errNotJSONRPC) that says what the
// gateway answers. The message's raw parts are slices of data, not copies: it
// is read on every request, so it is validated and scanned, not decoded; the
// parts the gateway acts on are decoded where they are used.
func ParseMessage(data []byte) (*Message, error) {
	// A leading UTF-8 byte order mark is no JSON, but readers that decode
	// the body as text first drop it (the TypeScript SDK's TextDecoder
	// does), so the gateway reads past it too.
	data = bytes.TrimPrefix(data, utf8BOM)
	// Validated whole first: the scanner below relies on valid JSON, and
	// bytes after the value ("{…}x", "{…}{…}") are where readers that stop
	// at the first value part ways with the gateway.
	if !json.Valid(data) {
		return nil, errMalformedJSON
	}
	data = data[jsonx.SkipSpace(data, 0):]
	switch data[0] {
	case '{':
	case '[':
		return nil, errBatch
	default:
		return nil, errNotObject
	}
	var m Message
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
		return nil, errMalformedJSON // unreachable for valid JSON
	}
	if ambiguous {
		return nil, errAmbiguousMember
	}
	// The version as every JSON reader decodes it: "2\u002e0" is "2.0" to
	// the upstream, so it must be to the gateway too.
	if string(version) != `"2.0"` && (len(version) == 0 || version[0] != '"' || jsonx.Unquote(version) != "2.0") {
		return nil, errVersion
	}
	if err := checkID(m.ID); err != nil {
		return nil, err
	}
	if method != nil {
		if method[0] != '"' {
			return nil, errMethodType
		}
		m.Method = jsonx.Unquote(method)
	}
	m.JSONRPC = "2.0"
	if rpcErr != nil && string(rpcErr) != "null" {
		if err := json.Unmarshal(rpcErr, &m.Error); err != nil {
			return nil, errErrorMember
		}
	}
	if string(m.Result) == "null" && m.Error != nil {
		m.Result = nil
	}
	return &m, nil
}

// ResponseBytes encodes a success response to id.
func ResponseBytes(id json.RawMessage, result any) ([]byte, error) {
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(result); err != nil {
			return nil, fmt.Errorf("encoding result: %w", err)
		}
		return responseRaw(id, raw), nil // encoded here: compact and escaped already
	}
	return json.Marshal(Message{JSONRPC: "2.0", ID: orNull(id), Result: raw})
}

// ErrorBytes encodes an error response to id (null when id is empty).
func ErrorBytes(id json.RawMessage, e *Error) []byte {
	b, err := json.Marshal(Message{JSONRPC: "2.0", ID: orNull(id), Error: e})
	if err != nil { // only reachable with invalid e.Data
		b, _ = json.Marshal(Message{JSONRPC: "2.0", ID: orNull(id), Error: &Error{Code: e.Code, Message: e.Message}})
	}
	return b
}

// RequestBytes encodes a request or, with a nil id, a notification.
func RequestBytes(id json.RawMessage, method string, params any) ([]byte, error) {
	raw, ok := params.(json.RawMessage)
	if !ok && params != nil {
		var err error
		if raw, err = json.Marshal(params); err != nil {
			return nil, fmt.Errorf("encoding %s params: %w", method, err)
		}
	}
	return json.Marshal(Message{JSONRPC: "2.0", ID: id, Method: method, Params: raw})
}

func orNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// paramsObject decodes params into a map of raw members; absent params give
// an empty map.
func paramsObject(params json.RawMessage) (map[string]json.RawMessage, error) {
	obj := map[string]json.RawMessage{}
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		return obj, nil
	}
	if err := json.Unmarshal(params, &obj); err != nil {
		return nil, fmt.Errorf("params must be an object: %w", err)
	}
	return obj, nil
}

// stringParam returns the string member name of params.
func stringParam(params json.RawMessage, name string) (string, error) {
	if s, ok := plainStringParam(params, name); ok {
		return s, nil
	}
	obj, err := paramsObject(params)
	if err != nil {
		return "", err
	}
	raw, ok := obj[name]
	if !ok {
		return "", fmt.Errorf("params.%s is required", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", fmt.Errorf("params.%s must be a non-empty string", name)
	}
	return s, nil
}
