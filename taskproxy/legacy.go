package taskproxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"
)

// The 2025-11-25 wire adapter: requestor-driven tasks (params.task), the
// tasks/* methods, and input relayed on the tasks/result stream.

const metaRelatedTask = "io.modelcontextprotocol/related-task"

// legacyTask is the 2025-11-25 Task object.
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        Status `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval,omitempty"`
}

const isoMillis = "2006-01-02T15:04:05.000Z07:00"

func toLegacyTask(t *Task) legacyTask {
	status := t.Status
	if status == StatusCompleted && t.IsError { // a 2026-07-28 task read on this wire
		status = StatusFailed
	}
	return legacyTask{
		TaskID:        t.ID,
		Status:        status,
		StatusMessage: t.StatusMessage,
		CreatedAt:     t.CreatedAt.UTC().Format(isoMillis),
		LastUpdatedAt: t.UpdatedAt.UTC().Format(isoMillis),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
	}
}

// errTaskNotFound is the one answer for unknown, expired and foreign ids.
func errTaskNotFound() *Error {
	return Errorf(CodeInvalidParams, "Failed to retrieve task: Task not found")
}

// lookupFailure maps a store error to the client's error. A task of another
// owner answers exactly as an unknown one; only the audit log records the
// denial.
func (c *call) lookupFailure(id string, err error) *Error {
	if errors.Is(err, ErrForeign) {
		c.g.audit(auditDenied, id, nil, c.caller)
	}
	return storeFailure(err)
}

// storeFailure maps a store error to the JSON-RPC error a client sees.
func storeFailure(err error) *Error {
	if errors.Is(err, ErrExpired) {
		return Errorf(CodeInvalidParams, "Failed to retrieve task: Task has expired")
	}
	if errors.Is(err, ErrNotFound) {
		return errTaskNotFound()
	}
	return Errorf(CodeInternalError, "task store: %v", err)
}

func (c *call) taskIDParam() (string, *Error) {
	id, err := stringParam(c.msg.Params, "taskId")
	if err != nil {
		return "", Errorf(CodeInvalidParams, "%v", err)
	}
	return id, nil
}

// serveLegacyToolsCall applies the tool's task mode: a task-augmented call
// becomes a task, a plain one passes through.
func (c *call) serveLegacyToolsCall() error {
	params, err := paramsObject(c.msg.Params)
	if err != nil {
		c.fail(Errorf(CodeInvalidParams, "%v", err))
		return nil
	}
	var name string
	_ = json.Unmarshal(params["name"], &name)
	taskMeta, augmented := params["task"]
	if augmented && string(taskMeta) == "null" {
		augmented = false
	}
	switch mode := c.g.toolMode(name); {
	case augmented && mode == TaskForbidden:
		c.fail(Errorf(CodeMethodNotFound, "Tool %q does not support task-augmented execution (taskSupport is forbidden)", name))
		return nil
	case !augmented && mode == TaskRequired:
		c.fail(Errorf(CodeMethodNotFound, "Tool %q requires task augmentation: send params.task (taskSupport is required)", name))
		return nil
	case augmented:
		if !c.guardOrigin() {
			return nil
		}
		return c.createLegacyTask(name, taskMeta)
	}
	return c.passTracked()
}

// passTracked passes a plain call through, registered in the call table so
// that a client's notifications/cancelled finds it.
func (c *call) passTracked() error {
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	remove := c.g.rt.calls.add(newCallKey(c.scope(), c.msg.ID), &plainCall{upstreamID: c.msg.ID, cancel: cancel})
	defer remove()
	return serveNext(c.next, c.w, c.r.WithContext(ctx))
}

// serveCancelled routes a client's notifications/cancelled: never to a task,
// and with the id the upstream knows for a plain call.
func (c *call) serveCancelled() error {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(c.msg.Params, &p)
	if isGatewayID(p.RequestID) {
		c.w.WriteHeader(http.StatusAccepted) // the gateway's own calls are cancelled with tasks/cancel only
		return nil
	}
	pc, ok := c.g.rt.calls.get(newCallKey(c.scope(), p.RequestID))
	if !ok || sameID(pc.upstreamID, p.RequestID) {
		return c.pass()
	}
	params, err := setMember(c.msg.Params, "requestId", pc.upstreamID)
	if err != nil {
		return c.pass()
	}
	body, err := RequestBytes(nil, c.msg.Method, json.RawMessage(params))
	if err != nil {
		return c.pass()
	}
	return serveNext(c.next, c.w, newUpstreamRequest(c.r.Context(), c.r, body))
}

// requestedTTL reads params.task.ttl (milliseconds) and applies the limits.
func (g *Gateway) requestedTTL(taskMeta json.RawMessage) (time.Duration, error) {
	var meta struct {
		TTL *float64 `json:"ttl"`
	}
	if err := json.Unmarshal(taskMeta, &meta); err != nil {
		return 0, errors.New("params.task must be an object")
	}
	if meta.TTL == nil || *meta.TTL <= 0 {
		return g.cfg.DefaultTTL, nil
	}
	ttl := time.Duration(*meta.TTL) * time.Millisecond
	return min(ttl, g.cfg.MaxTTL), nil
}

func (c *call) createLegacyTask(tool string, taskMeta json.RawMessage) error {
	g := c.g
	ttl, err := g.requestedTTL(taskMeta)
	if err != nil {
		c.fail(Errorf(CodeInvalidParams, "%v", err))
		return nil
	}
	if e := g.checkQuota(c.r.Context(), c.owner); e != nil {
		c.fail(e)
		return nil
	}
	params, err := deleteMember(c.msg.Params, "task")
	if err != nil {
		c.fail(Errorf(CodeInvalidParams, "params: %v", err))
		return nil
	}
	t := c.newTask(EraLegacy, tool, params, ttl)
	if !c.storeTask(t, legacyCreated, c.fail) {
		return nil
	}
	c.startTask(t)
	return c.reply(legacyCreated(t))
}

// legacyCreated is the 2025-11-25 CreateTaskResult.
func legacyCreated(t *Task) any {
	return struct {
		Task legacyTask `json:"task"`
	}{toLegacyTask(t)}
}

// newTask returns a working task record of the caller, leased to this
// process, with what a re-run would need of the request.
func (c *call) newTask(era Era, tool string, params json.RawMessage, ttl time.Duration) *Task {
	now := clock()
	id := NewTaskID()
	t := &Task{
		ID: id, Owner: c.caller.Owner, Principal: c.caller.Principal, Tenant: c.caller.Tenant, Status: StatusWorking,
		CreatedAt: now, UpdatedAt: now, TTL: ttl, PollInterval: c.g.cfg.PollInterval,
		Era: era, Tool: tool, Params: params, UpstreamID: upstreamCallID(id, 1), Round: 1,
		Lease:    Lease{Holder: c.g.rt.Store.Holder(), Expires: now.Add(leaseTTL)},
		Endpoint: c.r.URL.RequestURI(), Host: c.r.Host, Headers: routingHeaders(c.r),
	}
	if era == EraLegacy {
		t.Session = c.r.Header.Get(headerSessionID)
	}
	t.IdempotencyKey, t.Fingerprint = idempotencyOf(c.r, c.msg.Params)
	return t
}

// storeTask stores a new task. It answers for itself, and returns false,
// when the store refuses: for an idempotent duplicate with the existing
// task, rendered by render.
func (c *call) storeTask(t *Task, render func(*Task) any, fail func(*Error)) bool {
	err := c.g.rt.Store.Create(c.r.Context(), t)
	var dup *DuplicateError
	switch {
	case err == nil:
		c.g.auditTask(auditCreated, t)
		return true
	case errors.As(err, &dup):
		prev, err := c.g.rt.Store.Get(c.r.Context(), c.owner, dup.TaskID)
		if err != nil {
			fail(storeFailure(err))
			return false
		}
		_ = c.reply(render(prev))
	case errors.Is(err, ErrIdempotencyMismatch):
		fail(errIdempotencyMismatch())
	default:
		fail(Errorf(CodeInternalError, "could not store the task: %v", err))
	}
	return false
}

// startTask starts the worker of a stored task, making its first call.
func (c *call) startTask(t *Task) {
	g := c.g
	run := g.newRun(g.cfg.Detach(c.r), c.next)
	body, err := RequestBytes(t.UpstreamID, "tools/call", t.Params)
	if err != nil {
		run.release()
		g.finish(t, nil, Errorf(CodeInternalError, "encoding the upstream call: %v", err))
		return
	}
	g.startWorker(t, run, startAttempt(run.ctx, run.base, run.next, t.UpstreamID, body), nil)
}

// checkQuota refuses a new task when the owner has too many active ones.
func (g *Gateway) checkQuota(ctx context.Context, owner string) *Error {
	if g.cfg.MaxActivePerOwner <= 0 {
		return nil
	}
	n, err := g.rt.Store.CountActive(ctx, owner)
	if err != nil {
		return Errorf(CodeInternalError, "task store: %v", err)
	}
	if n >= g.cfg.MaxActivePerOwner {
		return Errorf(CodeTooManyTasks, "too many active tasks (limit %d)", g.cfg.MaxActivePerOwner)
	}
	return nil
}

func (c *call) serveLegacyGet() error {
	id, e := c.taskIDParam()
	if e != nil {
		c.fail(e)
		return nil
	}
	t, err := c.g.rt.Store.Get(c.r.Context(), c.owner, id)
	if err != nil {
		c.fail(c.lookupFailure(id, err))
		return nil
	}
	c.g.audit(auditRetrieved, id, t, c.caller)
	return c.reply(toLegacyTask(t))
}

func (c *call) serveLegacyList() error {
	if !c.g.cfg.ListTasks {
		c.fail(Errorf(CodeMethodNotFound, "tasks/list is not offered: callers are not authenticated, so tasks cannot be listed per caller"))
		return nil
	}
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if err := json.Unmarshal(orEmptyObject(c.msg.Params), &p); err != nil {
		c.fail(Errorf(CodeInvalidParams, "params: %v", err))
		return nil
	}
	cursor := ""
	if p.Cursor != nil {
		cursor = *p.Cursor
	}
	tasks, next, err := c.g.rt.Store.List(c.r.Context(), c.owner, cursor, listPageSize)
	if errors.Is(err, ErrInvalidCursor) {
		c.fail(Errorf(CodeInvalidParams, "Invalid cursor"))
		return nil
	}
	if err != nil {
		c.fail(storeFailure(err))
		return nil
	}
	out := struct {
		Tasks      []legacyTask `json:"tasks"`
		NextCursor string       `json:"nextCursor,omitempty"`
	}{Tasks: make([]legacyTask, 0, len(tasks)), NextCursor: next}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, toLegacyTask(t))
	}
	return c.reply(out)
}

const listPageSize = 50

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}")
	}
	return raw
}

func (c *call) serveLegacyCancel() error {
	id, e := c.taskIDParam()
	if e != nil {
		c.fail(e)
		return nil
	}
	t, err := c.g.cancelTask(c.r.Context(), c.owner, id, c.next)
	if errors.Is(err, ErrTerminal) {
		cur, gerr := c.g.rt.Store.Get(c.r.Context(), c.owner, id)
		if gerr != nil {
			c.fail(c.lookupFailure(id, gerr))
			return nil
		}
		c.fail(Errorf(CodeInvalidParams, "Cannot cancel task: already in terminal status '%s'", cur.Status))
		return nil
	}
	if err != nil {
		c.fail(c.lookupFailure(id, err))
		return nil
	}
	return c.reply(toLegacyTask(t))
}

// cancelTask records the cancellation, then stops the upstream call: it
// sends the upstream notifications/cancelled with the id the upstream knows
// and closes the call's stream.
func (g *Gateway) cancelTask(ctx context.Context, owner, id string, next http.Handler) (*Task, error) {
	t, err := g.rt.Store.Update(ctx, owner, id, func(t *Task) error {
		return t.SetStatus(StatusCancelled, "The task was cancelled by request.", clock())
	})
	if err != nil {
		return nil, err
	}
	g.rt.Hub.Changed(id)
	g.auditTask(auditCancelled, t)
	if run, ok := g.rt.workers.get(id); ok {
		if t.Era == EraLegacy { // on 2026-07-28 closing the stream is the cancellation
			g.notifyUpstreamCancelled(ctx, run, t, "task cancelled by the client")
		}
		run.cancel(errTaskCancelled)
	}
	return t, nil
}

// notifyUpstreamCancelled tells the upstream the worker's call is cancelled.
func (g *Gateway) notifyUpstreamCancelled(ctx context.Context, run *runningTask, t *Task, reason string) {
	body, err := RequestBytes(nil, "notifications/cancelled", map[string]any{
		"requestId": t.UpstreamID,
		"reason":    reason,
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	req := newUpstreamRequest(ctx, run.base, body)
	if t.Session != "" {
		req.Header.Set(headerSessionID, t.Session)
	}
	resp, err := callUpstream(run.next, req)
	if err != nil {
		g.log.Warn("forwarding cancellation upstream", zap.String("task", t.ID), zap.Error(err))
		return
	}
	_ = resp.Body.Close()
	if resp.Status >= 300 {
		g.log.Warn("upstream refused the cancellation", zap.String("task", t.ID), zap.Int("status", resp.Status))
	}
}

// serveLegacyResult blocks until the task is terminal, then answers what the
// upstream answered. Meanwhile, on an SSE answer, it relays the task's input
// requests, progress and status changes.
func (c *call) serveLegacyResult() error {
	id, e := c.taskIDParam()
	if e != nil {
		c.fail(e)
		return nil
	}
	g := c.g
	sub := g.rt.Hub.Subscribe(id) // before the first read, so no change is missed
	defer sub.Close()
	t, err := g.rt.Store.Get(c.r.Context(), c.owner, id)
	if err != nil {
		c.fail(c.lookupFailure(id, err))
		return nil
	}
	g.audit(auditRetrieved, id, t, c.caller)
	if t.Status.Terminal() {
		writeJSON(c.w, http.StatusOK, legacyFinalAnswer(c.msg.ID, t))
		return nil
	}
	var sse *SSEWriter
	if acceptsSSE(c.r) {
		sse = StartSSE(c.w)
	}
	s := &resultStream{c: c, sse: sse, sent: map[string]bool{}}
	if run, ok := g.rt.workers.get(id); ok && sse != nil {
		if p := run.progress(); p != nil {
			s.progress(p)
		}
	}
	keepAlive := time.NewTicker(15 * time.Second)
	defer keepAlive.Stop()
	for {
		if t.Status.Terminal() {
			s.final(t)
			return nil
		}
		s.update(t)
		select {
		case <-sub.Changed:
		case p := <-sub.Progress:
			s.progress(p)
			continue
		case <-keepAlive.C:
			if sse != nil && sse.WriteComment("keep-alive") != nil {
				return nil
			}
			continue
		case <-c.r.Context().Done():
			return nil
		case <-g.cfg.Stopping:
			return nil
		}
		if t, err = g.rt.Store.Get(c.r.Context(), c.owner, id); err != nil {
			s.fail(c.lookupFailure(id, err))
			return nil
		}
	}
}

func acceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// resultStream is one tasks/result answer in progress.
type resultStream struct {
	c          *call
	sse        *SSEWriter
	sent       map[string]bool // input keys already relayed on this stream
	lastStatus Status
}

func (s *resultStream) write(data []byte) {
	if s.sse != nil {
		_ = s.sse.WriteEvent("", data)
	}
}

// update relays outstanding input requests and status changes.
func (s *resultStream) update(t *Task) {
	if s.sse == nil {
		return
	}
	if t.Status != s.lastStatus && s.lastStatus != "" {
		if data, err := RequestBytes(nil, "notifications/tasks/status", toLegacyTask(t)); err == nil {
			s.write(data)
		}
	}
	s.lastStatus = t.Status
	for _, in := range t.Outstanding() {
		if s.sent[in.Key] {
			continue
		}
		params, err := setPath(orEmptyObject(in.Params), []string{"_meta", metaRelatedTask}, relatedTaskMeta(t.ID))
		if err != nil {
			continue
		}
		if data, err := RequestBytes(inputID(t.ID, in.Key), in.Method, json.RawMessage(params)); err == nil {
			s.write(data)
			s.sent[in.Key] = true
		}
	}
}

func (s *resultStream) progress(params json.RawMessage) {
	if data, err := RequestBytes(nil, "notifications/progress", params); err == nil {
		s.write(data)
	}
}

func (s *resultStream) final(t *Task) {
	data := legacyFinalAnswer(s.c.msg.ID, t)
	if s.sse != nil {
		s.write(data)
		return
	}
	writeJSON(s.c.w, http.StatusOK, data)
}

func (s *resultStream) fail(e *Error) {
	data := ErrorBytes(s.c.msg.ID, e)
	if s.sse != nil {
		s.write(data)
		return
	}
	writeJSON(s.c.w, http.StatusOK, data)
}

func relatedTaskMeta(id string) []byte {
	b, _ := json.Marshal(map[string]string{"taskId": id})
	return b
}

// legacyFinalAnswer is the tasks/result response for a terminal task:
// exactly what the upstream answered (a result carries the related-task
// meta), or the gateway's error when there was no upstream answer.
func legacyFinalAnswer(id json.RawMessage, t *Task) []byte {
	switch {
	case t.Result != nil:
		result, err := setPath(t.Result, []string{"_meta", metaRelatedTask}, relatedTaskMeta(t.ID))
		if err != nil {
			result = t.Result
		}
		data, err := ResponseBytes(id, json.RawMessage(result))
		if err == nil {
			return data
		}
		return ErrorBytes(id, Errorf(CodeInternalError, "encoding task result: %v", err))
	case t.Error != nil:
		return ErrorBytes(id, t.Error)
	case t.Status == StatusCancelled:
		return ErrorBytes(id, Errorf(CodeInternalError, "Task %s was cancelled", t.ID))
	}
	return ErrorBytes(id, Errorf(CodeInternalError, "Task %s ended %s without a result", t.ID, t.Status))
}

// serveInputAnswer takes a client's response to an input request relayed on
// a tasks/result stream and forwards it to the upstream under the id the
// upstream asked with.
func (c *call) serveInputAnswer(taskID, key string) error {
	t, err := c.g.rt.Store.Get(c.r.Context(), c.owner, taskID)
	if err != nil {
		writeJSONError(c.w, http.StatusNotFound, nil, c.lookupFailure(taskID, err))
		return nil
	}
	if _, ok := t.Input(key); !ok {
		writeJSONError(c.w, http.StatusBadRequest, nil, Errorf(CodeInvalidParams, "no input request %q for this task", key))
		return nil
	}
	answers := map[string]inputAnswer{key: {Result: c.msg.Result, Error: c.msg.Error}}
	if _, err := c.g.answerInputs(c.r.Context(), c.owner, taskID, answers, c.r, c.next); err != nil {
		writeJSONError(c.w, http.StatusBadGateway, nil, Errorf(CodeInternalError, "%v", err))
		return nil
	}
	c.w.WriteHeader(http.StatusAccepted)
	return nil
}

// errNoChange aborts an update that finds nothing to do.
var errNoChange = errors.New("no change")
