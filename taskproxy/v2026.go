package taskproxy

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The 2026-07-28 wire adapter: the io.modelcontextprotocol/tasks extension.
// Tasks are server-directed: a tools/call from a client that declares the
// extension in its per-request capabilities becomes a task when it outlives
// task_after (always, for tools marked required). The gateway validates only
// what it answers itself or may turn into a task; the rest is the upstream's.

const (
	extensionTasks         = "io.modelcontextprotocol/tasks"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// supportedVersions are the protocol versions the gateway serves.
var supportedVersions = []string{string(task.Era2026), string(task.Era2025)}

// v2026Status is the HTTP status of a JSON-RPC error on the 2026-07-28
// wire: 404 for an unknown method, 400 for malformed requests.
func v2026Status(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest, jsonrpc.CodeParseError, jsonrpc.CodeHeaderMismatch,
		jsonrpc.CodeMissingRequiredClientCapability, jsonrpc.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// failV2026 writes a JSON-RPC error with its 2026-07-28 HTTP status.
func (c *call) failV2026(e *jsonrpc.Error) {
	writeJSONError(c.w, v2026Status(e.Code), c.msg.ID, e)
}

var ackComplete = json.RawMessage(`{"resultType":"complete"}`)

func (c *call) serveV2026() error {
	if !c.msg.IsRequest() {
		return c.pass()
	}
	if c.bridges() { // a 2025-11-25 upstream: the version bridge answers
		return c.serveBridged()
	}
	switch c.msg.Method {
	case "server/discover":
		return c.passRewriting(rewriteDiscover)
	case "tools/call":
		return c.serveV2026ToolsCall()
	case "tasks/get", "tasks/update", "tasks/cancel":
		if !c.validV2026(true) || !c.guardOrigin() || c.limited() {
			return nil
		}
		switch c.msg.Method {
		case "tasks/get":
			return c.serveV2026Get()
		case "tasks/update":
			return c.serveV2026Update()
		}
		return c.serveV2026Cancel()
	case "tasks/result", "tasks/list":
		if !c.validV2026(false) {
			return nil
		}
		c.failV2026(jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "Method not found: %s is not part of the 2026-07-28 tasks extension", c.msg.Method))
		return nil
	case "subscriptions/listen":
		if taskIDs, ok, e := listenTaskIDs(c.msg.Params); ok {
			if !c.validV2026(true) || !c.guardOrigin() || c.limited() {
				return nil
			}
			if e != nil {
				c.failV2026(e)
				return nil
			}
			return c.serveListen(taskIDs)
		}
	}
	return c.pass()
}

// requestMeta is what the gateway reads of a request's params._meta.
type requestMeta struct {
	version      string
	capabilities json.RawMessage
}

// declaresTasks reports whether the request's client capabilities list the
// tasks extension.
func (m requestMeta) declaresTasks() bool {
	ext, ok := jsonx.Get(m.capabilities, "extensions")
	if !ok {
		return false
	}
	v, ok := jsonx.Get(ext, extensionTasks)
	return ok && len(v) > 0 && v[0] == '{'
}

func readRequestMeta(params json.RawMessage) (requestMeta, *jsonrpc.Error) {
	var m struct {
		Meta *struct {
			Version      *string         `json:"io.modelcontextprotocol/protocolVersion"`
			Capabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(jsonx.OrEmptyObject(params), &m); err != nil {
		return requestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
	}
	switch {
	case m.Meta == nil:
		return requestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing required params._meta")
	case m.Meta.Version == nil:
		return requestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing required _meta field %s", metaProtocolVersion)
	case len(m.Meta.Capabilities) == 0 || m.Meta.Capabilities[0] != '{':
		return requestMeta{}, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: missing required _meta field %s", metaClientCapabilities)
	}
	return requestMeta{version: *m.Meta.Version, capabilities: m.Meta.Capabilities}, nil
}

// validV2026 checks a request the gateway handles against the 2026-07-28
// rules: required _meta, a supported version equal to the header's, the
// routing headers, and (when needsTasks) the tasks extension declared. It
// writes the error and returns false when the request fails.
func (c *call) validV2026(needsTasks bool) bool {
	meta, e := readRequestMeta(c.msg.Params)
	if e == nil {
		e = checkV2026Headers(c.r, c.msg, meta, c.g.cfg.StrictRoutingHeaders)
	}
	if e == nil && needsTasks && !meta.declaresTasks() {
		e = errMissingTasksCapability(c.msg.Method + " needs the " + extensionTasks + " extension declared in this request's client capabilities")
	}
	if e != nil {
		c.failV2026(e)
		return false
	}
	return true
}

func errMissingTasksCapability(why string) *jsonrpc.Error {
	e := jsonrpc.Errorf(jsonrpc.CodeMissingRequiredClientCapability, "Missing required client capability: %s", why)
	e.Data = json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + extensionTasks + `":{}}}}`)
	return e
}

// checkV2026Headers validates MCP-Protocol-Version, Mcp-Method and Mcp-Name
// against the body. Unless strict, a tasks/get, tasks/update or
// tasks/cancel without Mcp-Name takes it from params.taskId (lenientTaskName).
func checkV2026Headers(r *http.Request, msg *jsonrpc.Message, meta requestMeta, strict bool) *jsonrpc.Error {
	if !isSupportedV2026(meta.version) {
		e := jsonrpc.Errorf(jsonrpc.CodeUnsupportedProtocolVersion, "Unsupported protocol version")
		e.Data, _ = json.Marshal(map[string]any{"supported": supportedVersions, "requested": meta.version})
		return e
	}
	if e := headerMatches(r, upstream.HeaderProtocolVersion, "MCP-Protocol-Version", meta.version); e != nil {
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
	name, err := stringParam(msg.Params, nameParam)
	if err != nil {
		return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: %v", err)
	}
	if !strict && nameParam == "taskId" && len(r.Header.Values(upstream.HeaderName)) == 0 {
		lenientTaskName(r, name)
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

func isSupportedV2026(v string) bool { return v == string(task.Era2026) }

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
// and leaves everything else (ttlMs, cacheScope, supportedVersions) alone.
func rewriteDiscover(result []byte) ([]byte, error) {
	return jsonx.SetPath(result, []string{"capabilities", "extensions", extensionTasks}, []byte("{}"))
}

// v2026Task renders a task on the 2026-07-28 wire: a CreateTaskResult
// (resultType "task"), a tasks/get result (resultType "complete", with the
// status's detail), or the params of notifications/tasks (no resultType).
type v2026Task struct {
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

// v2026StatusOf maps the record to this wire: a tool result with isError
// is completed here, whatever era created the task.
func v2026StatusOf(t *task.Task) task.Status {
	if t.Status == task.StatusFailed && t.Error == nil && t.Result != nil {
		return task.StatusCompleted
	}
	return t.Status
}

func toV2026Create(t *task.Task) v2026Task {
	return v2026Task{
		ResultType: "task", TaskID: t.ID, Status: v2026StatusOf(t), StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt.UTC().Format(isoMillis), LastUpdatedAt: t.UpdatedAt.UTC().Format(isoMillis),
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollInterval.Milliseconds(),
	}
}

// toV2026Detail is the DetailedTask: inputRequests while input is
// required, the result when completed, the error when failed.
func toV2026Detail(t *task.Task, resultType string) v2026Task {
	v := toV2026Create(t)
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

func (c *call) serveV2026Get() error {
	id, _ := c.taskIDParam()
	if c.serveCachedGet(id, runtime.WireV2026) {
		return nil
	}
	t, err := c.g.rt.Store.Get(c.r.Context(), c.owner, id)
	if err != nil {
		c.failV2026(c.lookupFailure(id, err))
		return nil
	}
	c.g.route.Audit(runtime.AuditRetrieved, id, t, c.caller)
	return c.replyView(t, runtime.WireV2026)
}

func (c *call) serveV2026Update() error {
	id, _ := c.taskIDParam()
	if raw, ok := jsonx.Get(c.msg.Params, "inputResponses"); ok {
		if n, err := countMembers(raw, runtime.MaxInputResponses); err == nil && n > runtime.MaxInputResponses {
			c.failV2026(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses has more than %d answers (limit %d per update)", runtime.MaxInputResponses, runtime.MaxInputResponses))
			return nil
		}
	}
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(c.msg.Params, &p); err != nil || p.InputResponses == nil {
		c.failV2026(jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: inputResponses must be an object"))
		return nil
	}
	answers := make(map[string]runtime.InputAnswer, len(p.InputResponses))
	for k, v := range p.InputResponses {
		answers[k] = runtime.InputAnswer{Result: v}
	}
	if _, err := c.g.route.AnswerInputs(c.r.Context(), c.owner, id, answers, c.r, c.next); err != nil {
		if errors.Is(err, task.ErrNotFound) {
			c.failV2026(c.lookupFailure(id, err))
		} else {
			c.failV2026(runtime.AnswerFailure(c.g.log, err, id))
		}
		return nil
	}
	return c.reply(ackComplete)
}

// serveV2026Cancel acknowledges at once; a task already ended keeps its
// state (cancellation is cooperative on this wire).
func (c *call) serveV2026Cancel() error {
	id, _ := c.taskIDParam()
	_, err := c.g.route.CancelTask(c.r.Context(), c.owner, id, c.next)
	if err != nil && !errors.Is(err, task.ErrTerminal) {
		c.failV2026(c.lookupFailure(id, err))
		return nil
	}
	return c.reply(ackComplete)
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
