package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// ErrNotJSONRPC is the root of every reason Parse refuses a body.
var ErrNotJSONRPC = errors.New("not a JSON-RPC 2.0 message")

// ReadError is a body Parse refused, with the JSON-RPC error the
// gateway answers it with: the gateway is fail-closed, so what it cannot read
// exactly as the upstream's JSON reader will is refused, never passed on
// unread (an upstream SDK could run what the gateway's tool modes, quota,
// task table and audit log never saw).
type ReadError struct {
	// Code is the JSON-RPC error code of the answer: CodeParseError or
	// CodeInvalidRequest.
	Code int
	// Reason says what is wrong, for the answer's message.
	Reason string
}

func (e *ReadError) Error() string { return ErrNotJSONRPC.Error() + ": " + e.Reason }

// Unwrap makes every ReadError an ErrNotJSONRPC.
func (e *ReadError) Unwrap() error { return ErrNotJSONRPC }

// rpcError is the JSON-RPC error answering e.
func (e *ReadError) RPCError() *Error {
	prefix := "Invalid Request: "
	if e.Code == CodeParseError {
		prefix = "Parse error: "
	}
	return Errorf(e.Code, "%s%s", prefix, e.Reason)
}

// The reasons a body is refused. Batches left the protocol in 2025-06-18, and
// SDKs that still run them would run each element unseen by the gateway.
var (
	ErrMalformedJSON   = &ReadError{CodeParseError, "the body is not one valid JSON value"}
	errBatch           = &ReadError{CodeInvalidRequest, "batches are not supported: send one JSON-RPC message per request"}
	errNotObject       = &ReadError{CodeInvalidRequest, "the body is not a JSON-RPC message object"}
	errVersion         = &ReadError{CodeInvalidRequest, `"jsonrpc" must be "2.0"`}
	errMethodType      = &ReadError{CodeInvalidRequest, "the method must be a string"}
	errErrorMember     = &ReadError{CodeInvalidRequest, "the error member is not a JSON-RPC error object"}
	errInvalidID       = &ReadError{CodeInvalidRequest, "the id must be a string or a number"}
	errAmbiguousMember = &ReadError{CodeInvalidRequest, "a member of the message appears twice or in another case"}
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

// Parse reads one JSON-RPC 2.0 message, exactly as Go's encoding/json
// (and the other readers MCP SDKs use) would: the body is one valid JSON
// value with nothing after it but whitespace, and a member of the envelope
// named twice or in another case is refused rather than guessed at. Anything
// else is refused with a *ReadError (an ErrNotJSONRPC) that says what the
// gateway answers. The message's raw parts are slices of data, not copies: it
// is read on every request, so it is validated and scanned, not decoded; the
// parts the gateway acts on are decoded where they are used. The parts end at
// their capacity, so an append makes a copy; data must not be written to
// while the message is in use, nor the parts written to in place.
func Parse(data []byte) (*Message, error) {
	m := new(Message)
	if err := ParseInto(m, data); err != nil {
		return nil, err
	}
	return m, nil
}

// ParseInto is Parse reading into m, which the caller may allocate with
// what else it holds per request; on an error m holds nothing of use.
func ParseInto(m *Message, data []byte) error {
	// A leading UTF-8 byte order mark is no JSON, but readers that decode
	// the body as text first drop it (the TypeScript SDK's TextDecoder
	// does), so the gateway reads past it too.
	data = bytes.TrimPrefix(data, utf8BOM)
	// Validated whole: the member spans rely on valid JSON, and bytes
	// after the value ("{…}x", "{…}{…}") are where readers that stop at
	// the first value part ways with the gateway. An object, the message
	// every request is, is validated and read in the same pass.
	if i := jsonx.SkipSpace(data, 0); i >= len(data) || data[i] != '{' {
		switch {
		case !jsonx.Valid(data):
			return ErrMalformedJSON
		case data[i] == '[':
			return errBatch
		}
		return errNotObject
	}
	*m = Message{}
	var version, method, rpcErr []byte
	var seen [len(envelopeMembers)]bool
	ambiguous := false
	if !jsonx.ValidObject(data, func(mem jsonx.Member) bool {
		// No capacity past the value: an append to a part makes a new
		// slice instead of writing into data, which may be a body handed
		// on as it came or an event's data string read in place.
		v := data[mem.ValueStart:mem.ValueEnd:mem.ValueEnd]
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
	}) {
		*m = Message{}
		return ErrMalformedJSON
	}
	if ambiguous {
		return errAmbiguousMember
	}
	// The version as every JSON reader decodes it: "2\u002e0" is "2.0" to
	// the upstream, so it must be to the gateway too.
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

// methodName decodes the method member raw. The methods clients send most
// are returned as constants, not copied out of the body: every request
// and notification names one.
func methodName(raw []byte) string {
	if len(raw) >= 2 {
		switch string(raw[1 : len(raw)-1]) {
		case "tools/call":
			return "tools/call"
		case "tools/list":
			return "tools/list"
		case "tasks/get":
			return "tasks/get"
		case "tasks/result":
			return "tasks/result"
		case "tasks/list":
			return "tasks/list"
		case "tasks/cancel":
			return "tasks/cancel"
		case "tasks/update":
			return "tasks/update"
		case "initialize":
			return "initialize"
		case "notifications/initialized":
			return "notifications/initialized"
		case "notifications/cancelled":
			return "notifications/cancelled"
		case "ping":
			return "ping"
		case "resources/list":
			return "resources/list"
		case "resources/read":
			return "resources/read"
		case "prompts/list":
			return "prompts/list"
		case "prompts/get":
			return "prompts/get"
		case "subscriptions/listen":
			return "subscriptions/listen"
		}
	}
	return jsonx.Unquote(raw)
}
