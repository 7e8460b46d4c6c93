package taskruntime

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
)

// callParams are the tools/call params the runtime reads.
type callParams struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   string                     `json:"requestState"`
}

// callTool runs a tool as a task or inside the call, by the tool's mode and
// by whether this request declared the extension. A params.task (the
// 2025-11-25 opt-in) is ignored, as the extension requires.
func (s *Server) callTool(x *exchange) (any, *rpcError) {
	var p callParams
	if err := json.Unmarshal(x.msg.Params, &p); err != nil {
		return nil, inBandError(CodeInvalidParams, "invalid tools/call params: %v", err)
	}
	spec, ok := s.tools[p.Name]
	if !ok {
		return nil, inBandError(CodeInvalidParams, "Unknown tool: %s", p.Name)
	}
	if _, _, err := parseArgs(p.Arguments, 1); err != nil {
		var rerr *rpcError
		if !errors.As(err, &rerr) {
			rerr = inBandError(CodeInvalidParams, "invalid arguments: %v", err)
		}
		return nil, rerr
	}
	// Input requests may only ask for what this request declared.
	for _, c := range spec.needs {
		if !x.meta.declares(c) {
			return nil, missingCapability(map[string]any{c: map[string]any{}})
		}
	}
	asTask := spec.mode == ModeRequired || spec.mode == ModeOptional && x.meta.declaresTasks()
	if asTask && !x.meta.declaresTasks() {
		return nil, missingCapability(tasksCapability())
	}
	s.mu.Lock()
	s.obs.calls[p.Name]++
	s.mu.Unlock()
	given, rerr := s.givenAnswers(spec, p)
	if rerr != nil {
		return nil, rerr
	}
	if asked, rerr := s.checkGuard(x, spec, given); asked != nil || rerr != nil {
		return asked, rerr // before any task
	}
	if asTask {
		created := s.createTask(x, spec, p.Arguments, given)
		s.holdAnswer(x, spec.name)
		return created, nil
	}
	return s.runPlain(x, spec, p, given)
}

// givenAnswers are the answers a call carries: those of earlier rounds in
// its requestState (checked: it comes back from the client), and its
// inputResponses.
func (s *Server) givenAnswers(spec *toolSpec, p callParams) (map[string]json.RawMessage, *rpcError) {
	given := map[string]json.RawMessage{}
	if p.RequestState != "" {
		prior, err := openState(s.stateKey, spec.name, p.RequestState)
		if err != nil {
			return nil, inBandError(CodeInvalidParams, "invalid requestState: %v", err)
		}
		maps.Copy(given, prior)
	}
	maps.Copy(given, p.InputResponses)
	return given, nil
}

// createTask stores the task before answering: a tasks/get for the id
// resolves as soon as the client has it. A guarded tool's task starts with
// the answers its call carried (given), so its work does not ask again.
func (s *Server) createTask(x *exchange, spec *toolSpec, args json.RawMessage, given map[string]json.RawMessage) map[string]any {
	now := s.now()
	t := &record{
		ID: newTaskID(), Owner: x.owner, Tool: spec.name, Args: args,
		Status: StatusWorking, StatusMessage: "Task created", CreatedAt: now, UpdatedAt: now,
		PollMs: s.pollInterval.Milliseconds(),
	}
	if spec.guard != nil && len(given) > 0 {
		t.Answers = given
	}
	if s.ttl > 0 {
		ms := s.ttl.Milliseconds()
		t.TTLMs = &ms
	}
	var a workArgs
	_ = json.Unmarshal(args, &a) // arguments of another shape ignore no cancel
	t.IgnoresCancel = a.IgnoreCancel
	s.mu.Lock()
	defer s.mu.Unlock()
	if k, ok := s.holds[spec.name]; ok {
		t.HoldAt = &k
	}
	s.tasks[t.ID] = t
	s.order = append(s.order, t.ID)
	s.obs.created[spec.name]++
	s.changedLocked(t)
	s.start(t)
	return t.createResult()
}

// runPlain runs a tool inside the call.
func (s *Server) runPlain(x *exchange, spec *toolSpec, p callParams, given map[string]json.RawMessage) (any, *rpcError) {
	w := &plainWork{ctx: x.r.Context(), tool: spec.name, key: s.stateKey, given: given}
	if len(x.meta.progressToken) > 0 {
		w.sse = &sseWriter{w: x.w, token: x.meta.progressToken}
	}
	res, err := spec.run(w, p.Arguments)
	var result any = res
	var rerr *rpcError
	var need *needInput
	switch {
	case errors.As(err, &need):
		result = need.result()
	case errors.As(err, &rerr):
	case err != nil:
		rerr = inBandError(CodeInternalError, "%v", err)
	}
	if w.sse != nil {
		x.answered = true
		if rerr != nil {
			_ = s.count(rerr) // counted only: the answer below carries rerr
		}
		w.sse.respond(x.msg.ID, result, rerr)
		return nil, nil
	}
	if rerr != nil {
		rerr.status = http.StatusOK
		return nil, rerr
	}
	return result, nil
}

// taskParams are the params of the three task methods.
type taskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// taskRequest checks what all task methods share: the extension declared
// on this request (-32021 otherwise, as the extension says) and a task of
// this caller. Called with s.mu held.
func (s *Server) taskRequestLocked(x *exchange) (*record, taskParams, *rpcError) {
	var p taskParams
	if !x.meta.declaresTasks() {
		return nil, p, missingCapability(tasksCapability())
	}
	_ = json.Unmarshal(x.msg.Params, &p) // taskId was checked against Mcp-Name
	t, err := s.lookup(x.owner, p.TaskID)
	return t, p, err
}

func (s *Server) getTask(x *exchange) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _, err := s.taskRequestLocked(x)
	if err != nil {
		return nil, err
	}
	s.obs.gets[t.ID]++
	s.wakeLocked() // for WaitGets
	return t.detailed(), nil
}

// updateTask takes answers to outstanding input requests. Answers to keys
// not outstanding (never issued, answered already) are ignored; a partial
// set is kept and the task stays input_required until the rest arrive.
func (s *Server) updateTask(x *exchange) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, p, err := s.taskRequestLocked(x)
	if err != nil {
		return nil, err
	}
	if p.InputResponses == nil {
		return nil, inBandError(CodeInvalidParams, "tasks/update requires inputResponses")
	}
	s.obs.updates[t.ID]++
	took := false
	for k, v := range p.InputResponses {
		if _, ok := t.Outstanding[k]; !ok {
			continue
		}
		if t.Answers == nil {
			t.Answers = map[string]json.RawMessage{}
		}
		t.Answers[k] = v
		delete(t.Outstanding, k)
		took = true
	}
	if took {
		if len(t.Outstanding) == 0 && t.Status == StatusInputRequired {
			t.Status, t.StatusMessage = StatusWorking, "Input received"
		}
		s.changedLocked(t)
	}
	return map[string]any{"resultType": "complete"}, nil
}

// cancelTask acknowledges at once; the work stops cooperatively and the
// task becomes cancelled soon after (a task that ignores cancellation, or
// is finished already, keeps its course).
func (s *Server) cancelTask(x *exchange) (any, *rpcError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _, err := s.taskRequestLocked(x)
	if err != nil {
		return nil, err
	}
	s.obs.cancels[t.Tool]++
	if !t.Status.Terminal() && !t.CancelRequested {
		t.CancelRequested = true
		s.changedLocked(t)
		if stop := s.stops[t.ID]; stop != nil && !t.IgnoresCancel {
			stop(errCancelled)
		}
	}
	return map[string]any{"resultType": "complete"}, nil
}
