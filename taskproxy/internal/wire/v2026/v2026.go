package v2026

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The 2026-07-28 wire adapter: the io.modelcontextprotocol/tasks extension.
// Tasks are server-directed: a tools/call from a client that declares the
// extension in its per-request capabilities becomes a task when it outlives
// task_after (always, for tools marked required). The gateway validates only
// what it answers itself or may turn into a task; the rest is the upstream's.

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// SupportedVersions are the protocol versions the gateway serves.
var SupportedVersions = []string{string(task.Era2026), string(task.Era2025)}

// Status is the HTTP status of a JSON-RPC error on the 2026-07-28
// wire: 404 for an unknown method, 400 for malformed requests.
func Status(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError, jsonrpc.CodeHeaderMismatch,
		jsonrpc.CodeMissingRequiredClientCapability, jsonrpc.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// Fail writes the JSON-RPC error e with its 2026-07-28 HTTP status.
func Fail(x *wire.Exchange, e *jsonrpc.Error) {
	wire.TraceFailure(x.R, e)
	wire.WriteError(x.W, Status(e.Code), x.Msg.ID, e)
}

// fail is Fail of c.
func (c *call) fail(e *jsonrpc.Error) { Fail(c.Exchange, e) }

var ackComplete = json.RawMessage(`{"resultType":"complete"}`)

// call is one 2026-07-28 request.
type call struct {
	*wire.Exchange
	// h is the configuration's handler (nil for a call another package
	// makes: the version bridge's).
	h *Handler
}

// Serve answers a 2026-07-28 request: the task methods and a tools/call
// that may become a task itself, server/discover passed through with the
// extension added, anything else passed through.
func (h *Handler) Serve(x *wire.Exchange) error {
	c := &call{Exchange: x, h: h}
	if !c.Msg.IsRequest() {
		return c.Pass()
	}
	switch c.Msg.Method {
	case "server/discover":
		return c.PassRewriting(rewriteDiscover)
	case "tools/call":
		return c.serveToolsCall()
	case "tasks/get", "tasks/update", "tasks/cancel":
		if !c.valid(true) || !c.GuardOrigin() || c.Limited() {
			return nil
		}
		switch c.Msg.Method {
		case "tasks/get":
			return c.serveGet()
		case "tasks/update":
			return c.serveUpdate()
		}
		return c.serveCancel()
	case "tasks/result", "tasks/list":
		if !c.valid(false) {
			return nil
		}
		c.fail(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s is not part of the 2026-07-28 tasks extension", c.Msg.Method))
		return nil
	case "subscriptions/listen":
		if taskIDs, ok, e := ListenTaskIDs(c.Msg.Params); ok {
			if !c.valid(true) || !c.GuardOrigin() || c.Limited() {
				return nil
			}
			if e != nil {
				c.fail(e)
				return nil
			}
			return c.serveListen(taskIDs)
		}
	}
	return c.Pass()
}

// RequestMeta is what the gateway reads of a request's params._meta.
type RequestMeta struct {
	Version      string
	Capabilities json.RawMessage
}

// DeclaresTasks reports whether the request's client capabilities list the
// tasks extension.
func (m RequestMeta) DeclaresTasks() bool {
	ext, ok := jsonx.Get(m.Capabilities, "extensions")
	if !ok {
		return false
	}
	v, ok := jsonx.Get(ext, wire.ExtensionTasks)
	return ok && len(v) > 0 && v[0] == '{'
}

// ReadRequestMeta reads the request _meta every 2026-07-28 request carries.
// An absent member is "missing"; one of the wrong type, null included, is
// "invalid", naming what it should be: both are -32602.
func ReadRequestMeta(params json.RawMessage) (RequestMeta, *jsonrpc.Error) {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(jsonx.OrEmptyObject(params), &p); err != nil {
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
	}
	if len(p.Meta) == 0 {
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing required params._meta")
	}
	if kind := jsonKind(p.Meta); kind != kindObject {
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid params._meta: expected an object, got %s", kind)
	}
	var m struct {
		Version      json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
		Capabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	}
	if err := json.Unmarshal(p.Meta, &m); err != nil {
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
	}
	var version string
	switch {
	case len(m.Version) == 0:
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing required _meta field %s", wire.MetaProtocolVersion)
	case json.Unmarshal(m.Version, &version) != nil || jsonKind(m.Version) != kindString:
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid _meta field %s: expected a string, got %s", wire.MetaProtocolVersion, jsonKind(m.Version))
	case len(m.Capabilities) == 0:
		return RequestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing required _meta field %s", wire.MetaClientCapabilities)
	}
	if e := checkCapabilities(m.Capabilities); e != nil {
		return RequestMeta{}, e
	}
	return RequestMeta{Version: version, Capabilities: m.Capabilities}, nil
}

// checkCapabilities checks the shape of the client capabilities as far as
// the gateway reads them: an object, whose extensions, when present, are an
// object, whose tasks extension entry, when present, is an object (the
// schema types every extension's settings as one; the others are the
// upstream's to judge). A value of another type, null too, is malformed:
// the -32602 of a missing field, with its own message, and never taken for
// "not declared", whose -32021 would ask the client to declare what it
// believes it has declared.
func checkCapabilities(caps json.RawMessage) *jsonrpc.Error {
	if kind := jsonKind(caps); kind != kindObject {
		return invalidCapabilities("", kind)
	}
	ext, ok := jsonx.Get(caps, "extensions")
	if !ok {
		return nil
	}
	if kind := jsonKind(ext); kind != kindObject {
		return invalidCapabilities(".extensions", kind)
	}
	if settings, ok := jsonx.Get(ext, wire.ExtensionTasks); ok {
		if kind := jsonKind(settings); kind != kindObject {
			return invalidCapabilities(`.extensions["`+wire.ExtensionTasks+`"]`, kind)
		}
	}
	return nil
}

// invalidCapabilities is the -32602 of client capabilities whose member at
// path (empty: the capabilities themselves) is not an object.
func invalidCapabilities(path, kind string) *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: invalid _meta field %s%s: expected an object, got %s",
		wire.MetaClientCapabilities, path, kind)
}

const (
	kindObject = "an object"
	kindString = "a string"
)

// jsonKind names the type of the valid JSON value raw, with its article.
func jsonKind(raw []byte) string {
	if i := jsonx.SkipSpace(raw, 0); i < len(raw) {
		switch raw[i] {
		case '{':
			return kindObject
		case '[':
			return "an array"
		case '"':
			return kindString
		case 'n':
			return "null"
		case 't', 'f':
			return "a boolean"
		}
	}
	return "a number"
}

// Valid is valid for x, a request another package answers (the version
// bridge).
func Valid(x *wire.Exchange, needsTasks bool) bool { return (&call{Exchange: x}).valid(needsTasks) }

// valid checks a request the gateway handles against the 2026-07-28
// rules: required _meta, a supported version equal to the header's, the
// routing headers, and (when needsTasks) the tasks extension declared. It
// writes the error and returns false when the request fails.
func (c *call) valid(needsTasks bool) bool {
	meta, e := ReadRequestMeta(c.Msg.Params)
	if e == nil {
		e = checkHeaders(c.R, c.Msg, meta, c.StrictRoutingHeaders)
	}
	if e == nil && needsTasks && !meta.DeclaresTasks() {
		e = ErrMissingTasksCapability(c.Msg.Method + " needs the " + wire.ExtensionTasks + " extension declared in this request's client capabilities")
	}
	if e != nil {
		c.fail(e)
		return false
	}
	return true
}

// ErrMissingTasksCapability is the -32021 refusal, saying why.
func ErrMissingTasksCapability(why string) *jsonrpc.Error {
	e := jsonrpc.Errorf(jsonrpc.CodeMissingRequiredClientCapability, "Missing required client capability: %s", why)
	e.Data = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + wire.ExtensionTasks + `":{}}}}`)
	return e
}

// checkHeaders validates MCP-Protocol-Version, Mcp-Method and Mcp-Name
// against the body. Unless strict, a tasks/get, tasks/update or
// tasks/cancel without Mcp-Name takes it from params.taskId (lenientTaskName).
func checkHeaders(r *http.Request, msg *jsonrpc.Message, meta RequestMeta, strict bool) *jsonrpc.Error {
	if !isSupported(meta.Version) {
		e := jsonrpc.Errorf(jsonrpc.CodeUnsupportedProtocolVersion, "Unsupported protocol version")
		e.Data, _ = json.Marshal(map[string]any{"supported": SupportedVersions, "requested": meta.Version})
		return e
	}
	if e := headerMatches(r, upstream.HeaderProtocolVersion, "MCP-Protocol-Version", meta.Version); e != nil {
		return e
	}
	if e := headerMatches(r, upstream.HeaderMethod, upstream.HeaderMethod, msg.Method); e != nil {
		return e
	}
	var nameParam string
	switch msg.Method {
	case "tools/call", "prompts/get":
		nameParam = "name"
	case "tasks/get", "tasks/update", "tasks/cancel":
		nameParam = "taskId"
	default:
		return nil
	}
	name, err := wire.StringParam(msg.Params, nameParam)
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
	}
	if !strict && nameParam == "taskId" && len(r.Header.Values(upstream.HeaderName)) == 0 {
		lenientTaskName(r, name)
	}
	return headerMatches(r, upstream.HeaderName, upstream.HeaderName, name)
}

// passedOnHeadersAgree checks the routing headers of a tools/call before
// anything else, also when the gateway then passes the call on unjudged: it
// decides the tool's task mode, quota and audit by params.name, while an
// upstream or a balancer in front of it may route by Mcp-Name, so a header
// that disagrees with the body must not leave the gateway. A missing header
// is the upstream's to judge (checkHeaders requires it where the gateway
// answers).
func passedOnHeadersAgree(r *http.Request, msg *jsonrpc.Message) *jsonrpc.Error {
	if len(r.Header.Values(upstream.HeaderMethod)) > 0 {
		if e := headerMatches(r, upstream.HeaderMethod, upstream.HeaderMethod, msg.Method); e != nil {
			return e
		}
	}
	if len(r.Header.Values(upstream.HeaderName)) == 0 {
		return nil
	}
	name, err := wire.StringParam(msg.Params, "name")
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
	}
	return headerMatches(r, upstream.HeaderName, upstream.HeaderName, name)
}

// lenientTaskName sets the missing Mcp-Name of a task method from its
// params.taskId. The tasks extension says a client MUST send it, but
// FastMCP's tasks client (and the TypeScript SDK's before August 2026)
// sends tasks/get, tasks/update and tasks/cancel without it, and the
// servers they were written against accept that and refuse only a
// mismatch: refusing it here would lose every task such a client starts
// through the gateway. The header is set, not only skipped, so that a
// request passed on to an upstream carries it as the extension says.
// Config.StrictRoutingHeaders turns this off.
func lenientTaskName(r *http.Request, taskID string) {
	r.Header.Set(upstream.HeaderName, upstream.EncodeHeaderValue(taskID))
}

func isSupported(v string) bool { return v == string(task.Era2026) }

// headerMatches checks that header is present and, decoded, equals want.
func headerMatches(r *http.Request, header, display, want string) *jsonrpc.Error {
	values := r.Header.Values(header)
	if len(values) == 0 {
		return jsonrpc.Errorf(jsonrpc.CodeHeaderMismatch, "Header mismatch: required header %s is missing", display)
	}
	got, ok := decodeHeaderValue(values[0])
	if !ok || len(values) > 1 || got != want {
		return jsonrpc.Errorf(jsonrpc.CodeHeaderMismatch, "Header mismatch: %s header value '%s' does not match body value '%s'", display, printable(values[0]), printable(want))
	}
	return nil
}

// decodeHeaderValue undoes the =?base64?…?= form MCP uses for values that
// are not plain ASCII.
func decodeHeaderValue(v string) (string, bool) {
	const prefix, suffix = "=?base64?", "?="
	if !strings.HasPrefix(v, prefix) || !strings.HasSuffix(v, suffix) || len(v) < len(prefix)+len(suffix) {
		return v, true
	}
	raw, err := base64.StdEncoding.DecodeString(v[len(prefix) : len(v)-len(suffix)])
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// printable keeps error messages free of control characters and short.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// rewriteDiscover adds the tasks extension to the upstream's capabilities
// and leaves everything else (ttlMs, cacheScope, SupportedVersions) alone.
func rewriteDiscover(result []byte) ([]byte, error) {
	return jsonx.SetPath(result, []string{"capabilities", "extensions", wire.ExtensionTasks}, []byte("{}"))
}

// Task renders a task on the 2026-07-28 wire: a CreateTaskResult
// (resultType "task"), a tasks/get result (resultType "complete", with the
// status's detail), or the params of notifications/tasks (no resultType).
type Task struct {
	ResultType     string                     `json:"resultType,omitempty"`
	TaskID         string                     `json:"taskId"`
	Status         task.Status                `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *jsonrpc.Error             `json:"error,omitempty"`
	Meta           map[string]json.RawMessage `json:"_meta,omitempty"`
}

// statusOf maps the record to this wire: a tool result with isError
// is completed here, whatever era created the task.
func statusOf(t *task.Task) task.Status {
	if t.Status == task.StatusFailed && t.Error == nil && t.Result != nil {
		return task.StatusCompleted
	}
	return t.Status
}

// CreateResult is t as a CreateTaskResult.
func CreateResult(t *task.Task) Task {
	return Task{
		ResultType: "task", TaskID: t.ID, Status: statusOf(t), StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt.UTC().Format(wire.ISOMillis), LastUpdatedAt: t.UpdatedAt.UTC().Format(wire.ISOMillis),
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollInterval.Milliseconds(),
	}
}

// Detail is the DetailedTask: inputRequests while input is
// required, the result when completed, the error when failed.
func Detail(t *task.Task, resultType string) Task {
	v := CreateResult(t)
	v.ResultType = resultType
	switch v.Status {
	case task.StatusInputRequired:
		v.InputRequests = map[string]json.RawMessage{}
		for _, in := range t.Outstanding() {
			req, _ := json.Marshal(struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params,omitempty"`
			}{in.Method, in.Params})
			v.InputRequests[in.Key] = req
		}
	case task.StatusCompleted:
		v.Result = t.Result
		if v.Result == nil {
			v.Result = json.RawMessage("{}")
		}
	case task.StatusFailed:
		v.Error = t.Error
		if v.Error == nil {
			v.Error = jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", t.StatusMessage)
		}
	}
	return v
}

func (c *call) serveGet() error {
	if c.ServeCachedGet(runtime.WireV2026) {
		return nil
	}
	id, _ := c.TaskIDParam()
	t, err := c.Runtime.Store.Get(c.R.Context(), c.Owner, id)
	if err != nil {
		c.fail(c.LookupFailure(id, err))
		return nil
	}
	c.Route.Audit(runtime.AuditRetrieved, id, t, c.Caller)
	return c.ReplyView(t, runtime.WireV2026)
}

func (c *call) serveUpdate() error {
	id, _ := c.TaskIDParam()
	if raw, ok := jsonx.Get(c.Msg.Params, "inputResponses"); ok {
		if n, err := countMembers(raw, runtime.MaxInputResponses); err == nil && n > runtime.MaxInputResponses {
			c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses has more than %d answers (limit %d per update)", runtime.MaxInputResponses, runtime.MaxInputResponses))
			return nil
		}
	}
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(c.Msg.Params, &p); err != nil || p.InputResponses == nil {
		c.fail(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object"))
		return nil
	}
	answers := make(map[string]runtime.InputAnswer, len(p.InputResponses))
	for k, v := range p.InputResponses {
		answers[k] = runtime.InputAnswer{Result: v}
	}
	if _, err := c.Route.AnswerInputs(c.R.Context(), c.Owner, id, answers, c.R, c.Next); err != nil {
		if errors.Is(err, task.ErrNotFound) {
			c.fail(c.LookupFailure(id, err))
		} else {
			c.fail(rpcerr.AnswerFailure(c.Log, err, id))
		}
		return nil
	}
	return c.Reply(ackComplete)
}

// serveV2026Cancel acknowledges at once; a task already ended keeps its
// state (cancellation is cooperative on this wire).
func (c *call) serveCancel() error {
	id, _ := c.TaskIDParam()
	_, err := c.Route.CancelTask(c.R.Context(), c.Owner, id, c.Next)
	if err != nil && !errors.Is(err, task.ErrTerminal) {
		c.fail(c.LookupFailure(id, err))
		return nil
	}
	return c.Reply(ackComplete)
}

// countMembers counts the members of the JSON object at b, stopping after
// limit+1 of them, without decoding any.
func countMembers(b []byte, limit int) (int, error) {
	n := 0
	_, err := jsonx.EachMember(b, func(jsonx.Member) bool {
		n++
		return n <= limit
	})
	return n, err
}
