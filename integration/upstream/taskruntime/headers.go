package taskruntime

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Routing headers of the 2026-07-28 Streamable HTTP transport.
const (
	headerProtocolVersion = "MCP-Protocol-Version"
	headerMethod          = "Mcp-Method"
	headerName            = "Mcp-Name"
)

// requestMeta is what a request says about itself in params._meta.
type requestMeta struct {
	protocolVersion string
	capabilities    map[string]json.RawMessage
	progressToken   json.RawMessage
}

// declares reports whether the request's own client capabilities list the
// capability key (e.g. "elicitation"); a declaration is any JSON object.
func (m requestMeta) declares(key string) bool {
	raw, ok := m.capabilities[key]
	return ok && isObject(raw)
}

// declaresTasks reports whether this request declared the tasks extension.
// Only this request counts: 2026-07-28 servers infer nothing from earlier
// requests.
func (m requestMeta) declaresTasks() bool {
	var ext map[string]json.RawMessage
	if json.Unmarshal(m.capabilities["extensions"], &ext) != nil {
		return false
	}
	return isObject(ext[ExtensionID])
}

func isObject(raw json.RawMessage) bool {
	var v map[string]json.RawMessage
	return len(raw) > 0 && json.Unmarshal(raw, &v) == nil && v != nil
}

// nameSource says which params field a method's Mcp-Name header mirrors:
// the core's tools/call, prompts/get and resources/read, and the tasks
// extension's three task methods.
var nameSource = map[string]string{
	"tools/call":     "name",
	"prompts/get":    "name",
	"resources/read": "uri",
	"tasks/get":      "taskId",
	"tasks/update":   "taskId",
	"tasks/cancel":   "taskId",
}

// checkRequest validates a request's headers and _meta before dispatch, in
// this order (the first failure answers):
//
//  1. MCP-Protocol-Version header: missing or malformed → 400 -32020 (this
//     runtime serves no client old enough to omit it); a version other than
//     2026-07-28 → 400 -32022 with data {supported, requested}.
//  2. params._meta with a string protocolVersion and an object
//     clientCapabilities: missing → 400 -32602.
//  3. _meta protocolVersion differs from the header → 400 -32020.
//  4. Mcp-Method header: missing, malformed or not the body's method →
//     400 -32020.
//  5. Unknown method → 404 -32601 (checked here so that an unknown method
//     is never asked for an Mcp-Name).
//  6. Mcp-Name header, for the methods in nameSource: missing, malformed or
//     (after decoding the =?base64?…?= form) not the body's params.name,
//     params.uri or params.taskId → 400 -32020. A body without that field
//     is malformed: 400 -32602.
//
// A header given twice is malformed. A malformed value is one with a byte
// outside visible ASCII, space and tab, or with leading or trailing
// whitespace (clients must base64-encode those).
func checkRequest(r *http.Request, msg *message, known func(string) bool) (requestMeta, *rpcError) {
	var meta requestMeta
	version, err := singleHeader(r, headerProtocolVersion)
	if err != nil {
		return meta, err
	}
	if version != ProtocolVersion {
		e := protocolError(http.StatusBadRequest, CodeUnsupportedVersion, unsupportedVersionMessage)
		e.Data = map[string]any{"supported": []string{ProtocolVersion}, "requested": version}
		return meta, e
	}
	var params struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if len(msg.Params) > 0 {
		if json.Unmarshal(msg.Params, &params) != nil {
			return meta, protocolError(http.StatusBadRequest, CodeInvalidParams, "params must be an object")
		}
	}
	if json.Unmarshal(params.Meta[metaProtocolVersion], &meta.protocolVersion) != nil || meta.protocolVersion == "" {
		return meta, protocolError(http.StatusBadRequest, CodeInvalidParams, "params._meta[%q] is required", metaProtocolVersion)
	}
	if !isObject(params.Meta[metaClientCapabilities]) {
		return meta, protocolError(http.StatusBadRequest, CodeInvalidParams, "params._meta[%q] is required (an object)", metaClientCapabilities)
	}
	_ = json.Unmarshal(params.Meta[metaClientCapabilities], &meta.capabilities) // an object (checked above); members of other shapes stay unset
	meta.progressToken = params.Meta["progressToken"]
	if meta.protocolVersion != version {
		return meta, headerMismatch("%s header value '%s' does not match body value '%s'", headerProtocolVersion, version, meta.protocolVersion)
	}
	method, err := singleHeader(r, headerMethod)
	if err != nil {
		return meta, err
	}
	if method != msg.Method {
		return meta, headerMismatch("%s header value '%s' does not match body value '%s'", headerMethod, method, msg.Method)
	}
	if !known(msg.Method) {
		return meta, protocolError(http.StatusNotFound, CodeMethodNotFound, "Method not found: %s", msg.Method)
	}
	field, ok := nameSource[msg.Method]
	if !ok {
		return meta, nil
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(msg.Params, &fields) // params that are no object leave fields empty: refused just below
	var want string
	if json.Unmarshal(fields[field], &want) != nil {
		return meta, protocolError(http.StatusBadRequest, CodeInvalidParams, "params.%s is required (a string)", field)
	}
	raw, err := singleHeader(r, headerName)
	if err != nil {
		return meta, err
	}
	got, decodeErr := decodeHeaderValue(raw)
	if decodeErr != nil {
		return meta, headerMismatch("%s header value '%s' is not valid base64 UTF-8", headerName, raw)
	}
	if got != want {
		return meta, headerMismatch("%s header value '%s' does not match body value '%s'", headerName, got, want)
	}
	return meta, nil
}

// singleHeader returns the one value of a required header.
func singleHeader(r *http.Request, name string) (string, *rpcError) {
	values := r.Header.Values(name)
	switch {
	case len(values) == 0:
		return "", headerMismatch("required %s header is missing", name)
	case len(values) > 1:
		return "", headerMismatch("%s header given %d times", name, len(values))
	case !validHeaderValue(values[0]):
		return "", headerMismatch("%s header value has invalid characters", name)
	}
	return values[0], nil
}

// validHeaderValue accepts visible ASCII, space and tab, without leading or
// trailing whitespace.
func validHeaderValue(v string) bool {
	if v == "" || strings.TrimSpace(v) != v {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return false
		}
	}
	return true
}

// decodeHeaderValue undoes the =?base64?…?= sentinel encoding (markers are
// case-sensitive); other values are taken as they are.
func decodeHeaderValue(v string) (string, error) {
	const prefix, suffix = "=?base64?", "?="
	if !strings.HasPrefix(v, prefix) || !strings.HasSuffix(v, suffix) || len(v) < len(prefix)+len(suffix) {
		return v, nil
	}
	enc := v[len(prefix) : len(v)-len(suffix)]
	b, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(enc); err != nil {
			return "", err
		}
	}
	if !utf8.Valid(b) {
		return "", base64.CorruptInputError(0)
	}
	return string(b), nil
}

// checkOrigin rejects a browser-borne request from another site (DNS
// rebinding): an Origin header, when present, must name the request's own
// host or one of the allowed origins.
func checkOrigin(r *http.Request, allowed []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if slices.Contains(allowed, origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && u.Host == r.Host
}
