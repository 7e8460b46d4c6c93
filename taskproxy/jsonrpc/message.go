package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

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
	// Unavailable marks the error of a gateway whose task store cannot
	// serve for now: it goes out with HTTP 503 and Retry-After where the
	// status is still to be sent. It is neither sent nor stored.
	Unavailable bool `json:"-"`
}

// UnmarshalJSON decodes an error object, its code read as JSON Schema
// reads an integer: a peer that keeps numbers as floats writes -32602.0,
// which is -32602. A code with a fraction or beyond int's range is an
// error, as a string code is. null leaves e as it was.
func (e *Error) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var obj struct {
		Code    *jsonx.Integer  `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("reading a JSON-RPC error: %w", err)
	}
	code := 0
	if obj.Code != nil {
		code = int(*obj.Code)
		if int64(code) != int64(*obj.Code) {
			return fmt.Errorf("reading a JSON-RPC error: code %d: %w", *obj.Code, jsonx.ErrIntRange)
		}
	}
	*e = Error{Code: code, Message: obj.Message, Data: obj.Data}
	return nil
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

// ResponseBytes encodes a success response to id.
func ResponseBytes(id json.RawMessage, result any) ([]byte, error) {
	raw, ok := result.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(result); err != nil {
			return nil, fmt.Errorf("encoding result: %w", err)
		}
		return ResponseRaw(id, raw), nil // encoded here: compact and escaped already
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
	if data, ok := plainRequest(id, method, raw); ok {
		return data, nil
	}
	return json.Marshal(Message{JSONRPC: "2.0", ID: id, Method: method, Params: raw})
}

// plainRequest is the request json.Marshal would encode, built by
// appending, without its reflection and its second pass over params (a
// task's arguments, which can be large): only when encoding would change
// none of the bytes (no HTML-escaped characters, no spacing, a method that
// needs no escapes) and id and params are valid JSON; false otherwise.
func plainRequest(id json.RawMessage, method string, params json.RawMessage) ([]byte, bool) {
	if !plainRaw(id) || !plainRaw(params) || !plainName(method) {
		return nil, false
	}
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"method":"","params":}`)+len(id)+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0"`...)
	if len(id) > 0 {
		b = append(append(b, `,"id":`...), id...)
	}
	if method != "" {
		b = append(append(append(b, `,"method":"`...), method...), '"')
	}
	if len(params) > 0 {
		b = append(append(b, `,"params":`...), params...)
	}
	return append(b, '}'), true
}

// plainRaw reports whether encoding raw, a JSON value or nothing, keeps it
// byte for byte: valid, compact, with nothing encoding/json escapes.
func plainRaw(raw json.RawMessage) bool {
	return len(raw) == 0 || !bytes.ContainsAny(raw, "<>& \t\r\n\u2028\u2029") && jsonx.Valid(raw)
}

// plainName reports whether s encodes as a JSON string as it is: printable
// ASCII without quotes, backslashes or HTML-escaped characters.
func plainName(s string) bool {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

func orNull(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// ResponseRaw is ResponseBytes(id, result) for an encoded result, built by
// appending. An id that encoding would change (HTML-escaped characters,
// spacing) takes the encoder's path, so the bytes are always the same.
func ResponseRaw(id json.RawMessage, result []byte) []byte {
	return AppendResponseRaw(nil, id, result)
}

// AppendResponseRaw appends ResponseRaw(id, result) to b, growing it at
// most once: a caller may hand in a buffer it reuses.
func AppendResponseRaw(b []byte, id json.RawMessage, result []byte) []byte {
	if bytes.ContainsAny(id, "<>& \t\r\n\u2028\u2029") {
		data, err := json.Marshal(Message{JSONRPC: "2.0", ID: id, Result: result})
		if err == nil {
			return append(b, data...)
		}
	}
	id = orNull(id)
	b = slices.Grow(b, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}
