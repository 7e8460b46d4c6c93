package taskproxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// bridgedTaskUpstream puts fakeTaskUpstream (a 2025-11-25 server running
// "job" as its own task) behind 2025-11-25 sessions: initialize opens s-1
// and declares task calls; every other request must come on s-1. It
// records the session, version and Mcp-Method of each.
type bridgedTaskUpstream struct {
	*fakeTaskUpstream
	mu   sync.Mutex
	seen []string
	// dropped makes s-1 unknown (HTTP 404, as the TypeScript SDK answers)
	// and the next initialize open s-2.
	dropped bool
}

func (u *bridgedTaskUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil {
		return // the GET that opens a route after a restart
	}
	u.mu.Lock()
	live := "s-1"
	if u.dropped {
		live = "s-2"
	}
	u.mu.Unlock()
	switch m.Method {
	case "initialize":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(upstream.HeaderSessionID, live)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"fake","version":"1"}}}`))
		return
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
		return
	}
	u.mu.Lock()
	u.seen = append(u.seen, m.Method+" "+r.Header.Get(upstream.HeaderSessionID)+" "+r.Header.Get(upstream.HeaderProtocolVersion)+" "+r.Header.Get(upstream.HeaderMethod))
	u.mu.Unlock()
	switch sess := r.Header.Get(upstream.HeaderSessionID); {
	case sess == "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Mcp-Session-Id header is required"}}`))
		return
	case sess != live:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`))
		return
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	u.fakeTaskUpstream.ServeHTTP(w, r)
}

// offSession lists the requests that did not come on s-1 as 2025-11-25
// without 2026-07-28 routing headers.
func (u *bridgedTaskUpstream) offSession() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for _, s := range u.seen {
		if !strings.HasSuffix(s, " s-1 2025-11-25 ") {
			out = append(out, s)
		}
	}
	return out
}

// A 2026-07-28 call through the version bridge of a tool the upstream runs
// as its own task becomes the gateway's task at once, created upstream with
// params.task on the caller's session and followed there: input runtime.Relayed as
// inputRequests, the result with the 2026-07-28 fields, without the
// upstream's related-task.
func TestBridgedUpstreamTask(t *testing.T) {
	t.Parallel()
	report := &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"the report"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`)}
	tests := []struct {
		name   string
		caps   string
		elicit bool
		want   string // in the answer to the call
		status task.Status
	}{
		{"completed", declaring, false, `"resultType":"task"`, task.StatusCompleted},
		{"input answered with tasks/update", declaring, true, `"resultType":"task"`, task.StatusCompleted},
		{"without the tasks extension: refused", plainCaps, false, `"code":-32021`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := &bridgedTaskUpstream{fakeTaskUpstream: &fakeTaskUpstream{result: report, known: true, elicit: tt.elicit, answered: make(chan struct{})}}
			g := testGateway(t, Config{})
			defer g.rt.Close(time.Second)
			g.bridge.Pin(true)
			w := httptest.NewRecorder()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},` + tt.caps + `}}`
			if err := g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "job"), up); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(w.Body.String(), tt.want) {
				t.Fatalf("call answered HTTP %d %s, want %s", w.Code, w.Body, tt.want)
			}
			if tt.status == "" {
				if up.saw("tools/call") {
					t.Error("the refused call reached the upstream")
				}
				return
			}
			var created struct {
				Result struct{ TaskID string } `json:"result"`
			}
			_ = json.Unmarshal(w.Body.Bytes(), &created)
			id := created.Result.TaskID
			if tt.elicit {
				rec := waitStatus(t, g, task.Anonymous, id, task.StatusInputRequired)
				if len(rec.Inputs) != 1 || rec.Inputs[0].Method != "elicitation/create" {
					t.Fatalf("inputs %+v, want the upstream's elicitation", rec.Inputs)
				}
				update := `{"jsonrpc":"2.0","id":2,"method":"tasks/update","params":{"taskId":"` + id + `","inputResponses":{"` + rec.Inputs[0].Key + `":{"action":"accept","content":{}}},` + declaring + `}}`
				uw := httptest.NewRecorder()
				if err := g.ServeHTTP(uw, post(update, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tasks/update", "Mcp-Name", id), up); err != nil || uw.Code != http.StatusOK {
					t.Fatalf("tasks/update: HTTP %d %s %v", uw.Code, uw.Body, err)
				}
			}
			rec := waitEnded(t, g, task.Anonymous, id)
			if rec.Status != tt.status || rec.Session != "s-1" || rec.UpstreamTaskID != "up-1" || rec.Era != task.Era2026 {
				t.Errorf("task %s session %q upstream task %q era %s; want %s on s-1 following up-1", rec.Status, rec.Session, rec.UpstreamTaskID, rec.Era, tt.status)
			}
			if !strings.Contains(string(rec.Result), `"resultType":"complete"`) || strings.Contains(string(rec.Result), task.MetaRelatedTask) {
				t.Errorf("result %s, want the 2026-07-28 fields and no upstream related-task", rec.Result)
			}
			if v := rec.Headers[upstream.HeaderProtocolVersion]; v != "2025-11-25" || rec.Headers[upstream.HeaderMethod] != "" {
				t.Errorf("recorded headers %v, want the session's version for a follow after a restart", rec.Headers)
			}
			if string(up.taskParam) == "" {
				t.Error("the upstream's tools/call had no params.task")
			}
			if off := up.offSession(); len(off) > 0 {
				t.Errorf("requests off the session: %v", off)
			}
			if tt.elicit && !strings.Contains(string(up.answer), `"accept"`) {
				t.Errorf("the upstream got answer %s", up.answer)
			}
		})
	}
}

// After a restart, a bridged task fails when its call died with the
// process, and is followed again on its recorded upstream session when the
// upstream runs it as its own task.
func TestBridgedUpstreamTaskRecovery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		upstreamTaskID string
		want           task.Status
	}{
		{"bridged call: failed", "", task.StatusFailed},
		{"upstream's own task: followed again", "up-1", task.StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := &bridgedTaskUpstream{fakeTaskUpstream: &fakeTaskUpstream{result: report0(), known: true}}
			store := newMemStore(t)
			past := runtime.Now().Add(-time.Minute)
			id := task.NewTaskID()
			err := store.Create(t.Context(), &task.Task{ID: id, Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
				TTL: time.Hour, Era: task.Era2026, Tool: "job", Params: json.RawMessage(`{"name":"job"}`), Session: "s-1",
				Headers:      map[string]string{upstream.HeaderProtocolVersion: "2025-11-25"},
				UpstreamTask: tt.upstreamTaskID != "", UpstreamTaskID: tt.upstreamTaskID, Lease: task.Lease{Holder: "e0/p1", Expires: past}, Endpoint: "/mcp"})
			if err != nil {
				t.Fatal(err)
			}
			rt := NewRuntime(store)
			defer rt.Close(time.Second)
			g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
			mustStart(t, g)
			var rec *task.Task
			waitFor(t, "the resumed task's end", func() bool {
				_ = g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil), up)
				rec, _ = store.Get(context.Background(), "o", id)
				return rec != nil && rec.Status.Terminal()
			})
			if rec.Status != tt.want {
				t.Errorf("recovered task %s %+v, want %s", rec.Status, rec.Error, tt.want)
			}
			if tt.upstreamTaskID != "" && !up.saw("tasks/result") {
				t.Errorf("the upstream never saw tasks/result (saw %v)", up.seen)
			}
			if off := up.offSession(); len(off) > 0 {
				t.Errorf("requests off the session: %v", off)
			}
		})
	}
}

// An answer to a bridged task's input request that arrives while no worker
// runs (just after a restart, before the route resumed it) goes to the
// upstream on the task's session as 2025-11-25, not with the 2026-07-28
// caller's headers.
func TestBridgedAnswerWithoutWorker(t *testing.T) {
	t.Parallel()
	up := &bridgedTaskUpstream{fakeTaskUpstream: &fakeTaskUpstream{answered: make(chan struct{})}}
	g := testGateway(t, Config{})
	defer g.rt.Close(time.Second)
	now := runtime.Now()
	id := task.NewTaskID()
	rec := &task.Task{ID: id, Owner: task.Anonymous, Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour,
		Era: task.Era2026, Tool: "job", Session: "s-1", Headers: map[string]string{upstream.HeaderProtocolVersion: "2025-11-25"},
		UpstreamTask: true, UpstreamTaskID: "up-1"}
	rec.AddInput(task.InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{}`), UpstreamID: json.RawMessage(`7`)})
	if err := rec.SetStatus(task.StatusInputRequired, runtime.MsgBridgedInput, now); err != nil {
		t.Fatal(err)
	}
	if err := g.rt.Store.Create(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	caller := post(`{}`, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tasks/update", "Mcp-Name", id)
	answers := map[string]runtime.InputAnswer{rec.Inputs[0].Key: {Result: json.RawMessage(`{"action":"accept"}`)}}
	if _, err := g.env.Route.AnswerInputs(t.Context(), task.Anonymous, id, answers, caller, up); err != nil {
		t.Fatal(err)
	}
	if off := up.offSession(); len(off) > 0 || !strings.Contains(string(up.answer), "accept") {
		t.Errorf("answer %s; requests off the session: %v", up.answer, off)
	}
}

// A bridged task whose creating call finds the caller's upstream session
// gone fails with why, and the session leaves the table: the next call
// opens a new one and runs.
func TestBridgedUpstreamTaskSessionLost(t *testing.T) {
	t.Parallel()
	report := &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"the report"}]}`)}
	up := &bridgedTaskUpstream{fakeTaskUpstream: &fakeTaskUpstream{result: report, known: true, answered: make(chan struct{})}}
	g := testGateway(t, Config{})
	defer g.rt.Close(time.Second)
	g.bridge.Pin(true)
	call := func() *task.Task {
		w := httptest.NewRecorder()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},` + declaring + `}}`
		if err := g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "job"), up); err != nil {
			t.Fatal(err)
		}
		var created struct {
			Result struct{ TaskID string } `json:"result"`
		}
		if json.Unmarshal(w.Body.Bytes(), &created) != nil || created.Result.TaskID == "" {
			t.Fatalf("call answered HTTP %d %s, want a task", w.Code, w.Body)
		}
		return waitEnded(t, g, task.Anonymous, created.Result.TaskID)
	}
	if rec := call(); rec.Status != task.StatusCompleted || rec.Session != "s-1" {
		t.Fatalf("first task %s on %q, want completed on s-1", rec.Status, rec.Session)
	}
	up.mu.Lock()
	up.dropped = true
	up.mu.Unlock()
	if rec := call(); rec.Status != task.StatusFailed || rec.Error == nil || !strings.Contains(rec.Error.Message, "no longer knows the session") {
		t.Errorf("task on the lost session: %s %+v, want failed with why", rec.Status, rec.Error)
	}
	if rec := call(); rec.Status != task.StatusCompleted || rec.Session != "s-2" {
		t.Errorf("next task %s on %q, want completed on a new session s-2", rec.Status, rec.Session)
	}
}
