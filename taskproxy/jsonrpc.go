package taskproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

var errNotJSONRPC = errors.New("not a JSON-RPC 2.0 message")

// errInvalidID is a JSON-RPC message whose id is neither a string, a number
// nor null (an object, an array, a boolean), and errUnparseableID one whose
// id is not even valid JSON.
var (
	errInvalidID     = fmt.Errorf("%w: id must be a string or a number", errNotJSONRPC)
	errUnparseableID = fmt.Errorf("%w: id is not valid JSON", errNotJSONRPC)
)

// checkID checks a raw id: a string, a number or null (or absent).
func checkID(id []byte) error {
	if len(id) == 0 {
		return nil
	}
	if !json.Valid(id) { // ids are short: this costs next to nothing
		return errUnparseableID
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

// errAmbiguousMember is a message that names a member of the envelope twice,
// or in another case ("Method"): readers differ on which one counts (Go's
// encoding/json matches keys case-insensitively and takes the last), so the
// gateway would act on one message and the upstream on another.
var errAmbiguousMember = fmt.Errorf("%w: a member of the envelope appears twice or in another case", errNotJSONRPC)

// envelopeMember returns the index of mem's key in envelopeMembers, -1
// when it is none of them, or len(envelopeMembers) when it is one of them
// in another case.
func envelopeMember(obj []byte, mem member) int {
	key := obj[mem.keyStart+1 : mem.keyEnd-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var decoded string
		if json.Unmarshal(obj[mem.keyStart:mem.keyEnd], &decoded) != nil {
			return -1
		}
		key = []byte(decoded)
	}
	if len(key) < 2 || len(key) > 7 {
		return -1 // cheap: no envelope member has another length
	}
	for i, name := range envelopeMembers {
		if string(key) == name {
			return i
		}
	}
	for _, name := range envelopeMembers {
		if bytes.EqualFold(key, []byte(name)) {
			return len(envelopeMembers)
		}
	}
	return -1
}

// malformedRequest is the JSON-RPC error of a request body ParseMessage
// refused with err, when the gateway must answer it: a message whose id is
// not valid JSON (-32700, Parse error) or not a kind of id JSON-RPC allows
// (-32600, Invalid Request); its id cannot be echoed, so the answer's is
// null. Anything else that is not one JSON-RPC message (batches, other JSON,
// text) is nil: it passes through, for the upstream to judge.
func malformedRequest(err error) *Error {
	switch {
	case errors.Is(err, errUnparseableID):
		return Errorf(CodeParseError, "Parse error: the request id is not valid JSON")
	case errors.Is(err, errInvalidID):
		return Errorf(CodeInvalidRequest, "Invalid Request: the id must be a string or a number")
	case errors.Is(err, errAmbiguousMember):
		return Errorf(CodeInvalidRequest, "Invalid Request: a member of the message appears twice or in another case")
	}
	return nil
}

// ParseMessage reads one JSON-RPC 2.0 message. Batches and anything that is
// not a single JSON-RPC object are rejected with errNotJSONRPC, so callers can
// pass them through untouched. The message's raw parts are slices of data,
// not copies: it is read on every request, so it is scanned, not decoded;
// the parts the gateway acts on are decoded where they are used.
func ParseMessage(data []byte) (*Message, error) {
	// A leading UTF-8 byte order mark is no JSON, but readers that decode
	// the body as text first drop it (the TypeScript SDK's TextDecoder
	// does): left unread here, such a message would pass to the upstream
	// as "not JSON-RPC" and act there unseen by the gateway.
	data = bytes.TrimSpace(bytes.TrimPrefix(data, utf8BOM))
	if len(data) == 0 || data[0] != '{' {
		return nil, errNotJSONRPC
	}
	var m Message
	var version, method, rpcErr []byte
	var seen [len(envelopeMembers)]bool
	ambiguous := false
	closing, err := eachMember(data, func(mem member) bool {
		v := data[mem.valueStart:mem.valueEnd]
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
	})
	if ambiguous {
		return nil, errAmbiguousMember
	}
	if err != nil || skipSpace(data, closing+1) != len(data) {
		return nil, fmt.Errorf("%w: malformed JSON object", errNotJSONRPC)
	}
	// The version as every JSON reader decodes it: "2\u002e0" is "2.0" to
	// the upstream, so it must be to the gateway too.
	if string(version) != `"2.0"` && (len(version) == 0 || version[0] != '"' || unquote(version) != "2.0") {
		return nil, errNotJSONRPC
	}
	if err := checkID(m.ID); err != nil {
		return nil, err
	}
	if method != nil {
		if method[0] != '"' {
			return nil, fmt.Errorf("%w: method is not a string", errNotJSONRPC)
		}
		m.Method = unquote(method)
	}
	m.JSONRPC = "2.0"
	if rpcErr != nil && string(rpcErr) != "null" {
		if err := json.Unmarshal(rpcErr, &m.Error); err != nil {
			return nil, fmt.Errorf("%w: %v", errNotJSONRPC, err)
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
