package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// recorder is a Tracker that keeps what a loop hands it, and answers the
// upstream's input requests once it has recorded them.
type recorder struct {
	mu       sync.Mutex
	answer   json.RawMessage // the client's answer to every input request
	inputs   map[string]json.RawMessage
	statuses []string
	result   json.RawMessage
	err      *jsonrpc.Error
	cause    error
	finished int
	changed  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{answer: json.RawMessage(`{"action":"accept"}`), inputs: map[string]json.RawMessage{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) Finish(result json.RawMessage, rpcErr *jsonrpc.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.result, r.err = result, rpcErr
	r.finished++
}

func (r *recorder) Interrupt(cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cause = cause
	r.finished++
}

func (r *recorder) Status(_ context.Context, upstreamTask json.RawMessage) {
	var up struct {
		StatusMessage string `json:"statusMessage"`
	}
	_ = json.Unmarshal(upstreamTask, &up)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.statuses = append(r.statuses, up.StatusMessage)
}

func (r *recorder) Request(*jsonrpc.Message) {}

func (r *recorder) Inputs(requests map[string]json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.inputs, requests)
	select { // the client answers at once
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *recorder) Answers(_ context.Context, sent map[string]bool) map[string]json.RawMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]json.RawMessage{}
	for k := range r.inputs {
		if !sent[k] {
			out[k] = r.answer
		}
	}
	return out
}

// v2026Upstream is a 2026-07-28 server running one task: working with a
// status message, then asking for input under key "confirm", completed
// once tasks/update answered it. Every request must carry the task's
// routing headers and _meta.
func v2026Upstream(t *testing.T, taskID string) http.Handler {
	t.Helper()
	var mu sync.Mutex
	answered, gets := false, 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, "not JSON-RPC", http.StatusBadRequest)
			return
		}
		if r.Header.Get("Mcp-Method") != m.Method || r.Header.Get("Mcp-Name") != taskID || r.Header.Get("Mcp-Protocol-Version") != string(task.Era2026) {
			t.Errorf("%s without its routing headers: %v", m.Method, r.Header)
		}
		var p struct {
			TaskID         string                     `json:"taskId"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
			Meta           map[string]json.RawMessage `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if _, ok := p.Meta["io.modelcontextprotocol/clientCapabilities"]; !ok || p.TaskID != taskID {
			t.Errorf("%s params %s: want the task id and the client capabilities", m.Method, m.Params)
		}
		mu.Lock()
		var result string
		switch m.Method {
		case "tasks/update":
			answered = string(p.InputResponses["confirm"]) == `{"action":"accept"}`
			result = `{}`
		case "tasks/get":
			gets++
			switch {
			case answered:
				result = `{"taskId":"` + taskID + `","status":"completed","pollIntervalMs":50,"result":{"content":[{"type":"text","text":"done"}]}}`
			case gets == 1:
				result = `{"taskId":"` + taskID + `","status":"working","statusMessage":"Analyzing","pollIntervalMs":50}`
			default:
				result = `{"taskId":"` + taskID + `","status":"input_required","pollIntervalMs":50,"inputRequests":{"confirm":{"method":"elicitation/create","params":{"message":"go on?"}}}}`
			}
		default:
			t.Errorf("unexpected %s", m.Method)
		}
		mu.Unlock()
		out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(result))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
}

// The 2026-07-28 loop hands the tracker the upstream task's status
// message, its input requests, sends the tracker's answers with
// tasks/update, and ends with the upstream's result.
func TestLoopV2026(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	tk := &task.Task{ID: "gw-1", UpstreamTaskID: "up-1", Era: task.Era2026, PollInterval: time.Millisecond,
		Params: json.RawMessage(`{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`)}
	l := Loop{Task: tk, Base: httptest.NewRequest(http.MethodPost, "/mcp", nil), Next: v2026Upstream(t, "up-1"), Log: zap.NewNop()}
	// A loop that never sees the task end is interrupted by the deadline.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l.V2026(ctx, rec.changed, rec)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.finished != 1 || rec.cause != nil || rec.err != nil || string(rec.result) != `{"content":[{"type":"text","text":"done"}]}` {
		t.Fatalf("finished %d times, result %s, error %v, cause %v; want the upstream's result once", rec.finished, rec.result, rec.err, rec.cause)
	}
	if len(rec.statuses) == 0 || rec.statuses[0] != "Analyzing" {
		t.Errorf("status messages %q, want the upstream's", rec.statuses)
	}
	if _, ok := rec.inputs["confirm"]; !ok {
		t.Errorf("inputs %v, want the upstream's request under its key", rec.inputs)
	}
}

// The loop ends when the worker's context does, and says why; an
// upstream that no longer knows its task ends it with msgUpstreamTaskGone.
func TestLoopV2026Ends(t *testing.T) {
	t.Parallel()
	stopped := errors.New("worker stopped")
	tests := []struct {
		name    string
		next    http.HandlerFunc
		stop    bool
		wantErr bool
	}{
		{"context ended", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			m, _ := jsonrpc.Parse(body)
			out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"taskId":"up-1","status":"working"}`))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		}, true, false},
		{"task gone", func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			m, _ := jsonrpc.Parse(body)
			out := jsonrpc.ErrorBytes(m.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no such task"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder()
			ctx, cancel := context.WithCancelCause(t.Context())
			defer cancel(nil)
			if tt.stop {
				cancel(stopped)
			}
			tk := &task.Task{ID: "gw-1", UpstreamTaskID: "up-1", Era: task.Era2026}
			Loop{Task: tk, Base: httptest.NewRequest(http.MethodPost, "/mcp", nil), Next: tt.next, Log: zap.NewNop()}.V2026(ctx, rec.changed, rec)
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if rec.finished != 1 {
				t.Fatalf("finished %d times, want once", rec.finished)
			}
			if tt.stop && !errors.Is(rec.cause, stopped) {
				t.Errorf("interrupted with %v, want the context's cause", rec.cause)
			}
			if tt.wantErr && (rec.err == nil || rec.err.Message != fmt.Sprintf(msgUpstreamTaskGone, "up-1")) {
				t.Errorf("error %v, want the upstream task gone", rec.err)
			}
		})
	}
}

// Cancel sends tasks/cancel for the upstream's task: on 2026-07-28 with
// the extension's routing headers and no session, on 2025-11-25 on the
// task's session.
func TestLoopCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                     string
		tk                       *task.Task
		wantSession, wantVersion string
	}{
		{"2026-07-28", &task.Task{ID: "gw-1", Era: task.Era2026, UpstreamTask: true, UpstreamV2026: true, Session: "s-1", Params: json.RawMessage(`{"name":"x"}`)}, "", string(task.Era2026)},
		{"2025-11-25", &task.Task{ID: "gw-1", Era: task.Era2025, UpstreamTask: true, Session: "s-1"}, "s-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []string
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				m, _ := jsonrpc.Parse(body)
				var p struct {
					TaskID string `json:"taskId"`
				}
				_ = json.Unmarshal(m.Params, &p)
				mu.Lock()
				got = append(got, m.Method+" "+p.TaskID+" session="+r.Header.Get("Mcp-Session-Id")+" version="+r.Header.Get("Mcp-Protocol-Version"))
				mu.Unlock()
				out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{}`))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(out)
			})
			base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			base.Header.Set("Mcp-Session-Id", "client-session")
			Loop{Task: tt.tk, Base: base, Next: next, Log: zap.NewNop()}.Cancel(t.Context(), "up-1")
			want := "tasks/cancel up-1 session=" + tt.wantSession + " version=" + tt.wantVersion
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0] != want {
				t.Fatalf("upstream got %q, want one %q", got, want)
			}
		})
	}
}
