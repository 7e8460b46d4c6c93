package taskproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// fakeTaskUpstream is a FAKE 2025-11-25 task-aware upstream, for the edge
// cases the real one (the TypeScript everything server, in ./integration)
// cannot be made to show on demand: a task it fails, one it forgets, one
// it answers plainly. go-sdk v1.8.0 has no tasks, so there is no real Go
// upstream to use here. It declares "job" with taskSupport required.
type fakeTaskUpstream struct {
	// plain answers a task-augmented call with a plain result.
	plain bool
	// result answers tasks/result: a result, a JSON-RPC error, or, with
	// elicit, first an elicitation/create (id 7) and the result once the
	// answer arrived.
	result *jsonrpc.Message
	elicit bool
	// known says whether tasks/get and tasks/result know the task.
	known bool
	// hold, when set, keeps tasks/result waiting until it is closed.
	hold chan struct{}

	mu        sync.Mutex
	methods   []string
	taskParam json.RawMessage
	answer    json.RawMessage
	answered  chan struct{}
}

func (u *fakeTaskUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil {
		return // the GET that opens a route after a restart
	}
	u.mu.Lock()
	if m.Method != "" {
		u.methods = append(u.methods, m.Method)
	}
	u.mu.Unlock()
	reply := func(result any, e *jsonrpc.Error) {
		var data []byte
		if e != nil {
			data = jsonrpc.ErrorBytes(m.ID, e)
		} else {
			data, _ = jsonrpc.ResponseBytes(m.ID, result)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	}
	notFound := jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Failed to retrieve task: Task not found")
	switch {
	case m.IsResponse(): // the client's answer to the elicitation
		u.mu.Lock()
		u.answer = m.Result
		u.mu.Unlock()
		close(u.answered)
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/list":
		reply(json.RawMessage(`{"tools":[{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},{"name":"plain","inputSchema":{"type":"object"}}]}`), nil)
	case m.Method == "tools/call":
		tk, _ := jsonx.Get(m.Params, "task")
		u.mu.Lock()
		u.taskParam = tk
		u.mu.Unlock()
		if u.plain || tk == nil {
			reply(json.RawMessage(`{"content":[{"type":"text","text":"ran plainly"}]}`), nil)
			return
		}
		reply(json.RawMessage(`{"task":{"taskId":"up-1","status":"working","statusMessage":"started upstream","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000,"pollInterval":100}}`), nil)
	case m.Method == "tasks/get":
		if !u.known {
			reply(nil, notFound)
			return
		}
		status := "working"
		if u.result != nil && u.result.Error != nil {
			status = "failed"
		}
		reply(json.RawMessage(`{"taskId":"up-1","status":"`+status+`","statusMessage":"upstream says hi","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}`), nil)
	case m.Method == "tasks/result":
		if !u.known {
			reply(nil, notFound)
			return
		}
		if !u.elicit {
			if u.hold != nil {
				select {
				case <-u.hold:
				case <-r.Context().Done():
					return
				}
			}
			reply(u.result.Result, u.result.Error)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		req, _ := jsonrpc.RequestBytes(json.RawMessage(`7`), "elicitation/create", map[string]any{"message": "which one?", "requestedSchema": map[string]any{"type": "object"}})
		_, _ = fmt.Fprintf(w, "data: %s\n\n", req)
		w.(http.Flusher).Flush()
		select {
		case <-u.answered:
		case <-r.Context().Done():
			return
		}
		data, _ := jsonrpc.ResponseBytes(m.ID, u.result.Result)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", data)
	case m.Method == "tasks/cancel":
		reply(json.RawMessage(`{"taskId":"up-1","status":"cancelled","createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttl":60000}`), nil)
	default:
		reply(json.RawMessage(`{}`), nil)
	}
}

// initAnswer is the fake upstream's initialize answer, declaring task calls.
func initAnswer() http.Handler {
	return upstreamAnswer("application/json", `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"fake","version":"1"}}}`)
}

func (u *fakeTaskUpstream) saw(method string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Contains(u.methods, method)
}

// A task of a tool the upstream runs as a task is created there with
// params.task and followed to the upstream's outcome, whatever it is.
func TestUpstreamTaskFollow(t *testing.T) {
	t.Parallel()
	report := &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"the report"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`)}
	tests := []struct {
		name        string
		up          *fakeTaskUpstream
		want        task.Status
		wantResult  string // a substring of the recorded result
		wantError   string // a substring of the recorded error
		wantUpID    string
		wantMethods []string
	}{
		{name: "completed", up: &fakeTaskUpstream{result: report, known: true},
			want: task.StatusCompleted, wantResult: "the report", wantUpID: "up-1", wantMethods: []string{"tools/list", "tools/call", "tasks/result"}},
		{name: "upstream task failed", up: &fakeTaskUpstream{result: &jsonrpc.Message{Error: jsonrpc.Errorf(-32000, "research failed")}, known: true},
			want: task.StatusFailed, wantError: "research failed", wantUpID: "up-1", wantMethods: []string{"tasks/result", "tasks/get"}},
		{name: "upstream forgot the task", up: &fakeTaskUpstream{known: false},
			want: task.StatusFailed, wantError: "no longer knows its task up-1", wantUpID: "up-1"},
		{name: "upstream ran it plainly", up: &fakeTaskUpstream{plain: true},
			want: task.StatusCompleted, wantResult: "ran plainly"},
		{name: "input requested on tasks/result", up: &fakeTaskUpstream{result: report, known: true, elicit: true},
			want: task.StatusCompleted, wantResult: "the report", wantUpID: "up-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.up.answered = make(chan struct{})
			g := testGateway(t, Config{})
			defer g.rt.Close(time.Second)
			// An initialize declaring task calls passes through, no
			// tools/list: the gateway fetches one before deciding.
			_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), initAnswer())
			id := createV2025(t, g, tt.up)
			if tt.up.elicit {
				rec := waitStatus(t, g, task.Anonymous, id, task.StatusInputRequired)
				if len(rec.Inputs) != 1 || string(rec.Inputs[0].UpstreamID) != "7" || rec.Inputs[0].Method != "elicitation/create" {
					t.Fatalf("inputs %+v, want the upstream's elicitation (id 7)", rec.Inputs)
				}
				answer := map[string]runtime.InputAnswer{rec.Inputs[0].Key: {Result: json.RawMessage(`{"action":"accept","content":{"x":"y"}}`)}}
				if _, err := g.env.Route.AnswerInputs(context.Background(), task.Anonymous, id, answer, post(`{}`), tt.up); err != nil {
					t.Fatal(err)
				}
			}
			rec := waitEnded(t, g, task.Anonymous, id)
			if rec.Status != tt.want || rec.UpstreamTaskID != tt.wantUpID || !rec.UpstreamTask {
				t.Errorf("task %s, upstream task %q (upstreamTask %v); want %s, %q", rec.Status, rec.UpstreamTaskID, rec.UpstreamTask, tt.want, tt.wantUpID)
			}
			if tt.wantResult != "" && !strings.Contains(string(rec.Result), tt.wantResult) {
				t.Errorf("result %s, want %q", rec.Result, tt.wantResult)
			}
			if strings.Contains(string(rec.Result), task.MetaRelatedTask) {
				t.Errorf("result %s keeps the upstream's related-task meta", rec.Result)
			}
			if tt.wantError != "" && (rec.Error == nil || !strings.Contains(rec.Error.Message, tt.wantError)) {
				t.Errorf("error %+v, want %q", rec.Error, tt.wantError)
			}
			if string(tt.up.taskParam) != `{"ttl":3600000}` {
				t.Errorf("upstream saw params.task %s, want the task's ttl", tt.up.taskParam)
			}
			for _, m := range tt.wantMethods {
				if !tt.up.saw(m) {
					t.Errorf("the upstream never saw %s (saw %v)", m, tt.up.methods)
				}
			}
			if tt.up.elicit && !strings.Contains(string(tt.up.answer), `"accept"`) {
				t.Errorf("the upstream got answer %s", tt.up.answer)
			}
		})
	}
}

// Cancelling the task sends the upstream tasks/cancel for its own task.
func TestUpstreamTaskCancelled(t *testing.T) {
	t.Parallel()
	up := &fakeTaskUpstream{result: report0(), known: true, elicit: true, answered: make(chan struct{})}
	g := testGateway(t, Config{})
	defer g.rt.Close(time.Second)
	_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), initAnswer())
	id := createV2025(t, g, up)
	waitStatus(t, g, task.Anonymous, id, task.StatusInputRequired)
	if _, err := g.env.Route.CancelTask(context.Background(), task.Anonymous, id, up); err != nil {
		t.Fatal(err)
	}
	if !up.saw("tasks/cancel") {
		t.Errorf("the upstream never saw tasks/cancel (saw %v)", up.methods)
	}
}

func report0() *jsonrpc.Message { return &jsonrpc.Message{Result: json.RawMessage(`{"content":[]}`)} }

// After a restart, a task whose upstream task id is recorded is followed
// again there; one the upstream no longer knows fails with why, one it
// still runs completes.
func TestUpstreamTaskResumedAfterRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		up    *fakeTaskUpstream
		want  task.Status
		check string
	}{
		{"still running upstream", &fakeTaskUpstream{result: report0(), known: true}, task.StatusCompleted, ""},
		{"unknown upstream", &fakeTaskUpstream{known: false}, task.StatusFailed, "no longer knows its task up-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := newMemStore(t)
			past := runtime.Now().Add(-time.Minute)
			id := task.NewTaskID()
			err := store.Create(t.Context(), &task.Task{ID: id, Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
				TTL: time.Hour, Era: task.Era2025, Tool: "job", Params: json.RawMessage(`{"name":"job"}`), Session: "s1",
				UpstreamTask: true, UpstreamTaskID: "up-1", Lease: task.Lease{Holder: "e0/p1", Expires: past}, Endpoint: "/mcp"})
			if err != nil {
				t.Fatal(err)
			}
			rt := NewRuntime(store)
			defer rt.Close(time.Second)
			g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
			mustStart(t, g)
			// A request the route serves opens it for the resumed work;
			// served until then, since recovery runs concurrently.
			var rec *task.Task
			waitFor(t, "the resumed task's end", func() bool {
				_ = g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil), tc.up)
				rec, _ = store.Get(t.Context(), "o", id)
				return rec != nil && rec.Status.Terminal()
			})
			if rec.Status != tc.want || (tc.check != "" && (rec.Error == nil || !strings.Contains(rec.Error.Message, tc.check))) {
				t.Errorf("resumed task %s %+v, want %s %q", rec.Status, rec.Error, tc.want, tc.check)
			}
			if rec.StatusMessage == runtime.MsgRestarted {
				t.Error("failed as an unknown outcome instead of following the upstream's task")
			}
		})
	}
}

// The advertised and applied mode: the upstream's required wins when the
// upstream takes task calls; its forbidden never forbids the gateway's own
// tasks; nothing changes for tools the upstream does not run as tasks.
func TestEffectiveMode(t *testing.T) {
	t.Parallel()
	tools := `{"tools":[{"name":"req","execution":{"taskSupport":"required"}},{"name":"opt","execution":{"taskSupport":"optional"}},{"name":"forb","execution":{"taskSupport":"forbidden"}},{"name":"none"}]}`
	withTasks := `{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}`
	without := `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}`
	tests := []struct {
		name, init   string // "" = no initialize seen
		configured   map[string]task.Support
		tool         string
		want         task.Support
		wantRunsTask bool
	}{
		{"required upstream wins", withTasks, nil, "req", task.SupportRequired, true},
		{"required upstream beats configured forbidden", withTasks, map[string]task.Support{"req": task.SupportForbidden}, "req", task.SupportRequired, true},
		{"required upstream, no initialize seen nor stored: taken at its word", "", nil, "req", task.SupportRequired, true},
		{"optional upstream keeps the configured mode", withTasks, nil, "opt", task.SupportOptional, true},
		{"optional upstream, configured forbidden", withTasks, map[string]task.Support{"opt": task.SupportForbidden}, "opt", task.SupportForbidden, true},
		{"forbidden upstream does not forbid gateway tasks", withTasks, nil, "forb", task.SupportOptional, false},
		{"absent taskSupport is forbidden upstream", withTasks, nil, "none", task.SupportOptional, false},
		{"required without the tasks capability is not followed", without, nil, "req", task.SupportOptional, false},
		{"unknown tool", withTasks, nil, "other", task.SupportOptional, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{Tools: tt.configured})
			if tt.init != "" {
				if _, err := g.env.Tools.RewriteInitialize([]byte(tt.init)); err != nil {
					t.Fatal(err)
				}
			}
			out, err := g.env.Tools.RewriteToolsList([]byte(tools))
			if err != nil {
				t.Fatal(err)
			}
			if got := g.env.Tools.EffectiveMode(tt.tool); got != tt.want {
				t.Errorf("effectiveMode = %s, want %s", got, tt.want)
			}
			if got := g.env.Tools.UpstreamRunsTask(tt.tool); got != tt.wantRunsTask {
				t.Errorf("upstreamRunsTask = %v, want %v", got, tt.wantRunsTask)
			}
			if tt.tool != "other" && !strings.Contains(string(out), `"name":"`+tt.tool+`"`) {
				t.Fatalf("rewritten list lost %s: %s", tt.tool, out)
			}
		})
	}
}

// On the 2026-07-28 wire a call of a tool the upstream runs as a task (and
// requires) becomes the gateway's task at once, created at the upstream and
// followed; without the extension declared it is refused with -32021.
func TestUpstreamTaskV2026(t *testing.T) {
	t.Parallel()
	up := &fakeTaskUpstream{result: &jsonrpc.Message{Result: json.RawMessage(`{"content":[{"type":"text","text":"the report"}]}`)}, known: true, answered: make(chan struct{})}
	g := testGateway(t, Config{})
	defer g.rt.Close(time.Second)
	_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), initAnswer())
	if err := g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), up); err != nil {
		t.Fatal(err)
	}
	hdr := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "job"}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{%s}}`
	rec := httptest.NewRecorder()
	_ = g.ServeHTTP(rec, post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"job",`+fmt.Sprintf(meta, "")+`}}`, hdr...), up)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "-32021") {
		t.Errorf("without the extension: %d %s, want 400 -32021 (the upstream requires a task)", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	_ = g.ServeHTTP(rec, post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"job",`+fmt.Sprintf(meta, `"extensions":{"io.modelcontextprotocol/tasks":{}}`)+`}}`, hdr...), up)
	var created struct {
		Result struct {
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || created.Result.ResultType != "task" {
		t.Fatalf("with the extension: %s, want a CreateTaskResult", rec.Body)
	}
	tk := waitEnded(t, g, task.Anonymous, created.Result.TaskID)
	if tk.Status != task.StatusCompleted || tk.UpstreamTaskID != "up-1" || !strings.Contains(string(tk.Result), "the report") {
		t.Errorf("task %s, upstream task %q, result %s", tk.Status, tk.UpstreamTaskID, tk.Result)
	}
}

// A followed task that expires cancels the upstream's task too.
func TestUpstreamTaskExpired(t *testing.T) {
	t.Parallel()
	up := &fakeTaskUpstream{result: report0(), known: true, elicit: true, answered: make(chan struct{})}
	g := testGateway(t, Config{DefaultTTL: time.Second, MaxTTL: time.Second})
	defer g.rt.Close(time.Second)
	_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), initAnswer())
	id := createV2025(t, g, up)
	rec := waitEnded(t, g, task.Anonymous, id)
	if rec.Status != task.StatusFailed || rec.Error == nil || !strings.Contains(rec.Error.Message, rpcerr.ErrTaskExpired.Error()) {
		t.Errorf("task %s %+v, want failed as expired", rec.Status, rec.Error)
	}
	waitFor(t, "the upstream's tasks/cancel", func() bool { return up.saw("tasks/cancel") })
}

// While the upstream's tasks/result blocks, the gateway polls its tasks/get
// and shows the upstream's status message on the task.
func TestUpstreamTaskStatusMirrored(t *testing.T) {
	t.Parallel()
	up := &fakeTaskUpstream{result: report0(), known: true, hold: make(chan struct{}), answered: make(chan struct{})}
	g := testGateway(t, Config{})
	defer g.rt.Close(time.Second)
	_ = g.ServeHTTP(httptest.NewRecorder(), post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`), initAnswer())
	id := createV2025(t, g, up)
	waitFor(t, "the upstream's status message on the task", func() bool {
		rec, err := g.rt.Store.Get(t.Context(), task.Anonymous, id)
		return err == nil && rec.StatusMessage == "upstream says hi"
	})
	close(up.hold)
	if rec := waitEnded(t, g, task.Anonymous, id); rec.Status != task.StatusCompleted {
		t.Errorf("task %s, want completed", rec.Status)
	}
}
