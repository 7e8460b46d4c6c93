package taskruntime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

// ProtocolVersion is the only protocol version the runtime speaks.
const ProtocolVersion = "2026-07-28"

// ExtensionID names the tasks extension in capabilities.
const ExtensionID = "io.modelcontextprotocol/tasks"

// Per-request and per-result _meta keys of the 2026-07-28 core.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// JSON-RPC error codes the runtime answers with. The -3202x codes are the
// ones 2026-07-28 defines; -32601 with HTTP 404 marks an unknown method.
const (
	CodeParseError            = -32700
	CodeInvalidRequest        = -32600
	CodeMethodNotFound        = -32601
	CodeInvalidParams         = -32602
	CodeInternalError         = -32603
	CodeHeaderMismatch        = -32020
	CodeMissingCapability     = -32021
	CodeUnsupportedVersion    = -32022
	codeSimulatedToolFailure  = CodeInternalError
	taskNotFoundMessage       = "Failed to retrieve task: Task not found"
	taskExpiredMessage        = "Failed to retrieve task: Task has expired"
	missingCapabilityMessage  = "Missing required client capability"
	unsupportedVersionMessage = "Unsupported protocol version"
)

// message is one JSON-RPC message as it arrives. ID stays raw so that a
// string id and a number id are echoed exactly; a present "id":null reads
// as the bytes null, an absent id as nil.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object plus the HTTP status it is sent with.
// 2026-07-28 gives protocol-level rejections their own statuses (400, 404);
// errors produced while handling a valid request stay in-band on 200, as the
// TypeScript SDK's 2026 server does.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
	status  int
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// protocolError is a rejection before dispatch, sent with an HTTP error
// status.
func protocolError(status, code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...), status: status}
}

// inBandError is an error of a request the runtime did handle (HTTP 200).
func inBandError(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...), status: http.StatusOK}
}

// headerMismatch is the -32020 rejection of a missing, malformed or
// disagreeing routing header.
func headerMismatch(format string, args ...any) *rpcError {
	return protocolError(http.StatusBadRequest, CodeHeaderMismatch, "Header mismatch: "+format, args...)
}

// missingCapability is the -32021 rejection naming what the request should
// have declared. The extension says it is sent with HTTP 400.
func missingCapability(required map[string]any) *rpcError {
	e := protocolError(http.StatusBadRequest, CodeMissingCapability, missingCapabilityMessage)
	e.Data = map[string]any{"requiredCapabilities": required}
	return e
}

// tasksCapability is the client capability the tasks extension needs.
func tasksCapability() map[string]any {
	return map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}
}

// writeResult answers a request with a JSON result object.
func writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	writeJSON(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// writeError answers with a JSON-RPC error. A nil id (unreadable request) is
// sent as an error response without an id.
func writeError(w http.ResponseWriter, id json.RawMessage, e *rpcError) {
	body := map[string]any{"jsonrpc": "2.0", "error": e}
	if id != nil {
		body["id"] = id
	}
	status := e.status
	if status == 0 {
		status = http.StatusOK
	}
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // a failed write means the client has gone
}

// validID reports whether a request id is a string or an integer, the only
// ids 2026-07-28 allows (never null).
func validID(id json.RawMessage) bool {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return false
	}
	switch n := v.(type) {
	case string:
		return true
	case float64:
		return n == float64(int64(n))
	}
	return false
}
