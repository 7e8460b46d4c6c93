package v2025

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// tasks/result (2025-11-25): a blocking answer that, while it waits, relays
// the task's input requests, progress and status on its event stream, and
// the client's answers to those input requests.

// serveV2025Result blocks until the task is terminal, then answers what the
// upstream answered. Meanwhile, on an SSE answer, it relays the task's input
// requests, progress and status changes.
func (c *call) serveResult() error {
	id, e := c.TaskIDParam()
	if e != nil {
		c.Fail(e)
		return nil
	}
	return c.streamResult(id)
}

// resumeRetry is the reconnection delay a tasks/result stream ended by a
// reload or stop asks of the client.
const resumeRetry = 2 * time.Second

// streamResult answers tasks/result for task id: at once when it ended,
// else once it ends, on an event stream when the client takes one. When the
// server stops or reloads meanwhile, the stream ends with a resumable event
// (an id and retry): the client reconnects (GET with Last-Event-ID) and the
// answer continues; a JSON answer gets 503 with Retry-After instead.
func (c *call) streamResult(id string) error {
	sub := c.Runtime.Hub.Subscribe(id) // before the first read, so no change is missed
	defer sub.Close()
	t, err := c.Runtime.Store.Get(c.R.Context(), c.Owner, id)
	if err != nil {
		c.Fail(c.LookupFailure(id, err))
		return nil
	}
	c.Route.Audit(runtime.AuditRetrieved, id, t, c.Caller)
	if t.Status.Terminal() {
		wire.WriteJSON(c.W, http.StatusOK, finalAnswer(c.Msg.ID, t))
		return nil
	}
	release := c.OpenStream()
	if release == nil {
		return nil
	}
	defer release()
	var stream *sse.Writer
	if wire.AcceptsSSE(c.R) {
		stream = sse.Start(c.W, 0)
	}
	s := &resultStream{c: c, sse: stream, sent: map[string]bool{}}
	if run, ok := c.Runtime.Worker(id); ok && stream != nil {
		if p := run.Progress(); p != nil {
			s.progress(p)
		}
	}
	keepAlive := time.NewTicker(wire.KeepAliveInterval)
	defer keepAlive.Stop()
	audited := t.Status
	for !s.broken {
		if t.Status.Terminal() {
			if t.Status != audited { // the reader of the result, when it came while waiting
				c.Route.Audit(runtime.AuditRetrieved, id, t, c.Caller)
			}
			s.final(t)
			return nil
		}
		s.update(t)
		if s.broken {
			return nil // the client stopped reading
		}
		select {
		case <-sub.Changed:
		case p := <-sub.Progress:
			s.progress(p)
			continue
		case <-keepAlive.C:
			if stream != nil && stream.WriteComment("keep-alive") != nil {
				return nil
			}
			continue
		case <-c.R.Context().Done():
			return nil
		case <-c.Stopping:
			s.resumable(id)
			return nil
		}
		if t, err = c.Runtime.Store.Get(c.R.Context(), c.Owner, id); err != nil {
			s.fail(c.LookupFailure(id, err))
			return nil
		}
	}
	return nil
}

// ServeResumedResult continues a tasks/result stream that a reload or stop
// ended: a GET whose Last-Event-ID is one of resultResumeID's.
func ServeResumedResult(x *wire.Exchange, taskID string) error {
	c := &call{x}
	if !c.GuardOrigin() || c.Limited() {
		return nil
	}
	return c.streamResult(taskID)
}

// resultResumeID names the point where a tasks/result stream of request id
// for task taskID was ended by the server: unique, and carrying what the
// resumed answer needs.
func resultResumeID(taskID string, id json.RawMessage) string {
	return jsonrpc.GatewayIDPrefix + taskID + ":result:" + base64.RawURLEncoding.EncodeToString(id) + ":" + task.NewTaskID()[:8]
}

// ParseResultResumeID recognises an id made by resultResumeID.
func ParseResultResumeID(s string) (taskID string, id json.RawMessage, ok bool) {
	rest, found := strings.CutPrefix(s, jsonrpc.GatewayIDPrefix)
	parts := strings.Split(rest, ":")
	if !found || len(parts) != 4 || parts[0] == "" || parts[1] != "result" {
		return "", nil, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !jsonx.Valid(raw) {
		return "", nil, false
	}
	return parts[0], raw, true
}

// resultStream is one tasks/result answer in progress.
type resultStream struct {
	c          *call
	sse        *sse.Writer
	sent       map[string]bool // input keys already relayed on this stream
	lastStatus task.Status
	broken     bool // a write failed: the client is gone or stopped reading
}

func (s *resultStream) write(data []byte) {
	if s.sse != nil && !s.broken && s.sse.WriteEvent("", data) != nil {
		s.broken = true
	}
}

// resumable ends the answer without the response, for the client to ask
// again: on an event stream with an event it resumes from, as JSON with
// 503 and Retry-After (never an empty 200).
func (s *resultStream) resumable(taskID string) {
	if s.sse != nil {
		if !s.broken {
			_ = s.sse.WriteResumable(resultResumeID(taskID, s.c.Msg.ID), resumeRetry)
		}
		return
	}
	s.c.W.Header().Set("Retry-After", strconv.Itoa(int(resumeRetry.Seconds())))
	wire.WriteError(s.c.W, http.StatusServiceUnavailable, s.c.Msg.ID,
		jsonrpc.Errorf(jsonrpc.CodeInternalError, "the gateway is reloading or stopping; call tasks/result again"))
}

// update relays outstanding input requests and status changes.
func (s *resultStream) update(t *task.Task) {
	if s.sse == nil {
		return
	}
	if t.Status != s.lastStatus && s.lastStatus != "" {
		if data, err := jsonrpc.RequestBytes(nil, "notifications/tasks/status", Render(t)); err == nil {
			s.write(data)
		}
	}
	s.lastStatus = t.Status
	for _, in := range t.Outstanding() {
		if s.sent[in.Key] {
			continue
		}
		params, err := jsonx.SetPath(jsonx.OrEmptyObject(in.Params), []string{"_meta", task.MetaRelatedTask}, relatedTaskMeta(t.ID))
		if err != nil {
			continue
		}
		if data, err := jsonrpc.RequestBytes(jsonrpc.InputID(t.ID, in.Key), in.Method, json.RawMessage(params)); err == nil {
			s.write(data)
			s.sent[in.Key] = true
		}
	}
}

func (s *resultStream) progress(params json.RawMessage) {
	if data, err := jsonrpc.RequestBytes(nil, "notifications/progress", params); err == nil {
		s.write(data)
	}
}

func (s *resultStream) final(t *task.Task) { s.answer(finalAnswer(s.c.Msg.ID, t)) }

func (s *resultStream) fail(e *jsonrpc.Error) { s.answer(jsonrpc.ErrorBytes(s.c.Msg.ID, e)) }

// answer ends the stream with the response: its last event, or the JSON
// body when the client took no event stream.
func (s *resultStream) answer(data []byte) {
	if s.sse != nil {
		s.write(data)
		return
	}
	wire.WriteJSON(s.c.W, http.StatusOK, data)
}

func relatedTaskMeta(id string) []byte {
	b, _ := json.Marshal(map[string]string{"taskId": id})
	return b
}

// finalAnswer is the tasks/result response for a terminal task:
// exactly what the upstream answered (a result carries the related-task
// meta), or the gateway's error when there was no upstream answer.
func finalAnswer(id json.RawMessage, t *task.Task) []byte {
	switch {
	case t.Result != nil:
		result, err := jsonx.SetPath(t.Result, []string{"_meta", task.MetaRelatedTask}, relatedTaskMeta(t.ID))
		if err != nil {
			result = t.Result
		}
		data, err := jsonrpc.ResponseBytes(id, json.RawMessage(result))
		if err == nil {
			return data
		}
		return jsonrpc.ErrorBytes(id, jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error: the stored result could not be encoded")) // no text of it
	case t.Error != nil:
		return jsonrpc.ErrorBytes(id, t.Error)
	case t.Status == task.StatusCancelled:
		return jsonrpc.ErrorBytes(id, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Task %s was cancelled", t.ID))
	}
	return jsonrpc.ErrorBytes(id, jsonrpc.Errorf(jsonrpc.CodeInternalError, "Task %s ended %s without a result", t.ID, t.Status))
}

// ServeInputAnswer takes a client's response to an input request relayed on
// a tasks/result stream and forwards it to the upstream under the id the
// upstream asked with.
func ServeInputAnswer(x *wire.Exchange, taskID, key string) error {
	c := &call{x}
	t, err := c.Runtime.Store.Get(c.R.Context(), c.Owner, taskID)
	if err != nil {
		wire.WriteError(c.W, http.StatusNotFound, nil, c.LookupFailure(taskID, err))
		return nil
	}
	if _, ok := t.Input(key); !ok {
		wire.WriteError(c.W, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no input request %q for this task", key))
		return nil
	}
	answers := map[string]runtime.InputAnswer{key: {Result: c.Msg.Result, Error: c.Msg.Error}}
	if _, err := c.Route.AnswerInputs(c.R.Context(), c.Owner, taskID, answers, c.R, c.Next); err != nil {
		wire.WriteError(c.W, http.StatusBadGateway, nil, rpcerr.AnswerFailure(c.Log, err, taskID))
		return nil
	}
	c.W.WriteHeader(http.StatusAccepted)
	return nil
}
