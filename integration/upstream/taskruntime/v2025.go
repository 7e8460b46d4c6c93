package taskruntime

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"
)

// A 2025-11-25 task-aware server ([Options.V2025Tasks]): the experimental
// tasks of 2025-11-25 as the TypeScript SDK's server serves them, over the
// same task store and work as the 2026-07-28 runtime. Stateless (no
// session id); only POST. A request whose MCP-Protocol-Version header
// names another version (a 2026-07-28 server/discover, say) gets HTTP 400
// with -32000, as the SDK answers it. initialize declares
// tasks.requests.tools.call and tasks.cancel; tools/list gives each tool's
// execution.taskSupport. A tools/call with params.task makes a task (a
// forbidden tool: -32601) and answers the CreateTaskResult, the Task
// under "task" (held back by [Server.HoldAnswers] as on 2026-07-28); one
// without runs the tool within the call (a required tool: -32601).
// tasks/get answers the flat Task; tasks/result blocks until the task
// ends and answers the tool's result (with the related-task _meta) or its
// error; tasks/cancel moves the task to cancelled before it answers (a
// terminal task: -32602), which stops its work. Only the tools that ask
// no input are served (steps, echo, fail_job): input on 2025-11-25 goes
// through tasks/result, which this mode does not carry. Notifications get
// 202 and are counted with the requests ([Server.Requests]), so that a
// test sees whether notifications/cancelled came.

// v2025Tools are the tools served in the 2025-11-25 mode.
var v2025Tools = []string{ToolSteps, ToolEcho, ToolFailJob}

// v2025Methods are the requests the 2025-11-25 mode answers.
var v2025Methods = map[string]func(*Server, *exchange) (any, *rpcError){
	"initialize":   func(*Server, *exchange) (any, *rpcError) { return v2025TaskServerInitializeResult(), nil },
	"ping":         func(*Server, *exchange) (any, *rpcError) { return map[string]any{}, nil },
	"tools/list":   (*Server).listV2025Tools,
	"tools/call":   (*Server).callV2025Tool,
	"tasks/get":    (*Server).getV2025Task,
	"tasks/result": (*Server).v2025TaskResult,
	"tasks/cancel": (*Server).cancelV2025Task,
}

// serveV2025 answers one request in the 2025-11-25 mode.
func (s *Server) serveV2025(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, nil, protocolError(http.StatusMethodNotAllowed, -32000, "Method not allowed."))
		return
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && v != v2025Version {
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, -32000,
			"Bad Request: Unsupported protocol version: %s (supported versions: %s)", v, v2025Version)))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		writeError(w, nil, protocolError(http.StatusBadRequest, CodeParseError, "reading request body: too large or unreadable"))
		return
	}
	var msg message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' || json.Unmarshal(body, &msg) != nil || msg.JSONRPC != "2.0" {
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, CodeParseError, "Parse error: one JSON-RPC message expected")))
		return
	}
	if msg.ID == nil || msg.Method == "" { // a notification, or a response: nothing to answer
		if msg.Method != "" { // counted: Requests("notifications/cancelled") says whether one came
			s.mu.Lock()
			s.obs.requests[msg.Method]++
			s.mu.Unlock()
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	handle, ok := v2025Methods[msg.Method]
	if !ok {
		writeError(w, msg.ID, s.count(inBandError(CodeMethodNotFound, "Method not found")))
		return
	}
	x := &exchange{w: w, r: r, msg: &msg, owner: s.ownerOf(r)}
	s.mu.Lock()
	s.sweepLocked()
	s.obs.requests[msg.Method]++
	s.mu.Unlock()
	result, rerr := handle(s, x)
	if rerr != nil {
		writeError(w, msg.ID, s.count(rerr))
		return
	}
	writeResult(w, msg.ID, result)
}

// v2025TaskServerInitializeResult answers initialize in the 2025-11-25
// mode: task-augmented tools/call and tasks/cancel declared, no session.
func v2025TaskServerInitializeResult() map[string]any {
	res := v2025InitializeResult()
	res["capabilities"] = map[string]any{
		"tools": map[string]any{},
		"tasks": map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}},
	}
	return res
}

func (s *Server) listV2025Tools(*exchange) (any, *rpcError) {
	tools := make([]any, 0, len(v2025Tools))
	for _, name := range v2025Tools {
		t := s.tools[name]
		l := t.listing()
		l["execution"] = map[string]any{"taskSupport": string(t.mode)}
		tools = append(tools, l)
	}
	return map[string]any{"tools": tools}, nil
}

// callV2025Tool makes a task of a call with params.task, and runs one
// without within the call.
func (s *Server) callV2025Tool(x *exchange) (any, *rpcError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Task      json.RawMessage `json:"task"`
	}
	if err := json.Unmarshal(x.msg.Params, &p); err != nil {
		return nil, inBandError(CodeInvalidParams, "invalid tools/call params: %v", err)
	}
	spec, ok := s.tools[p.Name]
	if !ok || spec.needs != nil || spec.guard != nil {
		return nil, inBandError(CodeInvalidParams, "Tool %s not found", p.Name)
	}
	if _, _, err := parseArgs(p.Arguments, 1); err != nil {
		return nil, inBandError(CodeInvalidParams, "invalid arguments: %v", err)
	}
	asTask := len(p.Task) > 0 && !bytes.Equal(p.Task, []byte("null"))
	switch {
	case asTask && spec.mode == ModeForbidden:
		return nil, inBandError(CodeMethodNotFound, "Tool %s does not support task augmentation", p.Name)
	case !asTask && spec.mode == ModeRequired:
		return nil, inBandError(CodeMethodNotFound, "Tool %s requires task augmentation", p.Name)
	}
	s.mu.Lock()
	s.obs.calls[p.Name]++
	s.mu.Unlock()
	if asTask {
		taskID, _ := s.createTask(x, spec, p.Arguments, nil)["taskId"].(string)
		s.mu.Lock()
		created := map[string]any{"task": s.tasks[taskID].v2025Task()} // as made: the answer may be held
		s.mu.Unlock()
		s.holdAnswer(x, spec.name)
		return created, nil
	}
	res, err := spec.run(&plainWork{ctx: x.r.Context(), tool: spec.name, key: s.stateKey}, p.Arguments)
	var rerr *rpcError
	switch {
	case errors.As(err, &rerr):
		rerr.status = http.StatusOK
		return nil, rerr
	case err != nil:
		return nil, inBandError(CodeInternalError, "%v", err)
	}
	return res, nil
}

// v2025Task is the 2025-11-25 Task of t: ttl and pollInterval in
// milliseconds, ttl null when unlimited.
func (t *record) v2025Task() map[string]any {
	m := map[string]any{
		"taskId":        t.ID,
		"status":        t.Status,
		"createdAt":     t.CreatedAt.UTC().Format(isoMillis),
		"lastUpdatedAt": t.UpdatedAt.UTC().Format(isoMillis),
		"ttl":           t.TTLMs,
		"pollInterval":  t.PollMs,
	}
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	}
	return m
}

// v2025TaskLocked reads params.taskId of a task method and finds the
// caller's task. Called with s.mu held.
func (s *Server) v2025TaskLocked(x *exchange) (*record, *rpcError) {
	var p taskParams
	if json.Unmarshal(x.msg.Params, &p) != nil || p.TaskID == "" {
		return nil, inBandError(CodeInvalidParams, "params.taskId is required")
	}
	return s.lookup(x.owner, p.TaskID)
}

func (s *Server) getV2025Task(x *exchange) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.v2025TaskLocked(x)
	if err != nil {
		return nil, err
	}
	s.obs.gets[t.ID]++
	s.wakeLocked() // for WaitGets
	return t.v2025Task(), nil
}

// v2025TaskResult blocks until the task ends, then answers what the call
// would have: the tool's result with the related-task _meta, or its
// error (a cancelled task's is -32603).
func (s *Server) v2025TaskResult(x *exchange) (any, *rpcError) {
	for {
		s.mu.Lock()
		t, err := s.v2025TaskLocked(x)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		status, result, rpcErr, changed := t.Status, t.Result, t.Error, s.changed
		s.mu.Unlock()
		switch status {
		case StatusCompleted:
			var res map[string]any
			if err := json.Unmarshal(result, &res); err != nil {
				return nil, inBandError(CodeInternalError, "reading the stored result: %v", err)
			}
			res["_meta"] = map[string]any{"io.modelcontextprotocol/related-task": map[string]any{"taskId": t.ID}}
			return res, nil
		case StatusFailed:
			e := *rpcErr
			e.status = http.StatusOK
			return nil, &e
		case StatusCancelled:
			return nil, inBandError(CodeInternalError, "Task %s was cancelled", t.ID)
		}
		select {
		case <-changed:
		case <-x.r.Context().Done():
			return nil, inBandError(CodeInternalError, "request closed")
		case <-time.After(time.Minute): // re-checked, as a sweep may have run
		}
	}
}

// cancelV2025Task moves the task to cancelled before it answers, as
// 2025-11-25 requires, and stops its work.
func (s *Server) cancelV2025Task(x *exchange) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.v2025TaskLocked(x)
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		return nil, inBandError(CodeInvalidParams, "Cannot cancel task: already in terminal status '%s'", t.Status)
	}
	s.obs.cancels[t.Tool]++
	t.CancelRequested, t.Held = true, false
	t.Status, t.StatusMessage = StatusCancelled, "Cancelled by request"
	if stop := s.stops[t.ID]; stop != nil {
		stop(errCancelled)
	}
	s.changedLocked(t)
	return t.v2025Task(), nil
}
