package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// readCountingStore counts the whole records and the summaries read
// through it.
type readCountingStore struct {
	task.Store
	records, summaries atomic.Int64
}

func (s *readCountingStore) Get(ctx context.Context, owner, id string) (*task.Task, error) {
	s.records.Add(1)
	return s.Store.Get(ctx, owner, id)
}

func (s *readCountingStore) GetSummary(ctx context.Context, owner, id string) (*task.Task, error) {
	s.summaries.Add(1)
	return task.GetSummary(ctx, s.Store, owner, id)
}

// listenStream is the client side of a subscriptions/listen stream.
type listenStream struct {
	t      *testing.T
	events *sse.Reader
	resp   *http.Response
}

// openListen posts a listen for ids as who and returns its stream, or the
// error answer when the listen was refused.
func openListen(t *testing.T, url, who string, ids []string) (*listenStream, *jsonrpc.Message) {
	t.Helper()
	quoted, _ := json.Marshal(ids)
	body := `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"notifications":{"taskIds":` + string(quoted) + `},` + declaring + `}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	req.Header.Set("X-Test-Caller", who)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		m, err := jsonrpc.Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("listen answered HTTP %d %q", resp.StatusCode, buf.String())
		}
		return nil, m
	}
	return &listenStream{t: t, events: sse.NewReader(resp.Body), resp: resp}, nil
}

// next returns the next message on the stream.
func (l *listenStream) next() (*jsonrpc.Message, map[string]json.RawMessage) {
	l.t.Helper()
	for {
		ev, err := l.events.Next()
		if err != nil {
			l.t.Fatalf("listen stream ended: %v", err)
		}
		if !ev.HasData || ev.Data == "" {
			continue
		}
		m, err := jsonrpc.Parse([]byte(ev.Data))
		if err != nil {
			l.t.Fatal(err)
		}
		var p map[string]json.RawMessage
		_ = json.Unmarshal(m.Params, &p)
		return m, p
	}
}

// until reads notifications/tasks until one of task id has the status
// message msg, and returns its params.
func (l *listenStream) until(id, status, msg string) map[string]json.RawMessage {
	l.t.Helper()
	for {
		m, p := l.next()
		if m.Method != "notifications/tasks" {
			l.t.Fatalf("unexpected %s on the listen stream", m.Method)
		}
		if string(p["taskId"]) == fmt.Sprintf("%q", id) && string(p["status"]) == fmt.Sprintf("%q", status) &&
			string(p["statusMessage"]) == fmt.Sprintf("%q", msg) {
			return p
		}
	}
}

// listenServer serves g over real HTTP, the caller named by X-Test-Caller.
func listenServer(t *testing.T, g *Gateway) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := r.Header.Get("X-Test-Caller")
		if err := g.ServeHTTP(w, WithCaller(r, task.Caller{Owner: who, Principal: who}), http.NotFoundHandler()); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A listen stream reads a task's record (its arguments and result) only
// when the task's summary moved, and only for a DetailedTask that inlines
// more than the summary: status message changes of a working task (what
// progress writes) and progress events cost no record reads, and the end of
// one task reads that task alone.
func TestListenReadsRecordsOfChangedTasksOnly(t *testing.T) {
	t.Parallel()
	store := &readCountingStore{Store: newMemStore(t)}
	rt := NewRuntime(store)
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	if err != nil {
		t.Fatal(err)
	}
	g.bridge.Pin(false)
	url := listenServer(t, g)
	ctx := context.Background()

	pad := strings.Repeat("x", 256<<10)
	var ids []string
	for i := range 4 {
		tk := &task.Task{ID: task.NewTaskID(), Owner: "alice", Status: task.StatusCompleted, CreatedAt: runtime.Now(), UpdatedAt: runtime.Now(),
			TTL: time.Hour, Era: task.Era2026, Tool: "echo", Params: json.RawMessage(`{"name":"echo","arguments":{"pad":"` + pad + `"}}`),
			Result: json.RawMessage(`{"content":[{"type":"text","text":"` + pad + `"}]}`)}
		if i == 0 { // leased by this process, as a running worker's task is
			tk.Status, tk.Result = task.StatusWorking, nil
			tk.Lease = task.Lease{Holder: store.Holder(), Expires: time.Now().Add(time.Hour)}
		}
		if err := store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	working := ids[0]

	l, refused := openListen(t, url, "alice", ids)
	if refused != nil {
		t.Fatalf("listen refused: %s", refused.Error.Message)
	}
	if m, _ := l.next(); m.Method != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %s, want the acknowledgement", m.Method)
	}
	for range ids {
		m, p := l.next()
		if m.Method != "notifications/tasks" {
			t.Fatalf("unexpected %s", m.Method)
		}
		if string(p["status"]) == `"completed"` && !bytes.Contains(p["result"], []byte(pad)) {
			t.Errorf("the first notification of a completed task lacks its result")
		}
	}

	// Progress: events, and the status messages the worker writes from
	// them, each waking the stream, as the runtime's worker does.
	before := store.records.Load()
	summariesBefore := store.summaries.Load()
	const steps = 5
	for i := 1; i <= steps; i++ {
		rt.Hub.Progress(working, json.RawMessage(fmt.Sprintf(`{"progress":%d,"total":%d}`, i, steps)))
		if _, err := store.Update(ctx, "alice", working, func(tk *task.Task) error {
			tk.StatusMessage, tk.UpdatedAt = fmt.Sprintf("progress %d/%d", i, steps), tk.UpdatedAt.Add(time.Millisecond)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rt.Hub.Changed(working)
	}
	l.until(working, "working", fmt.Sprintf("progress %d/%d", steps, steps))
	if n := store.records.Load() - before; n != 0 {
		t.Errorf("%d whole records read for %d status message changes of a working task; want none", n, steps)
	}
	if store.summaries.Load() == summariesBefore {
		t.Error("no summary read after the changes: the stream did not look at the tasks")
	}

	// The working task ends: its record (the result) is read, the
	// unchanged tasks' are not.
	before = store.records.Load()
	if _, err := store.Update(ctx, "alice", working, func(tk *task.Task) error {
		tk.Result = json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
		return tk.SetStatus(task.StatusCompleted, "finished", tk.UpdatedAt.Add(time.Millisecond))
	}); err != nil {
		t.Fatal(err)
	}
	rt.Hub.Changed(working)
	p := l.until(working, "completed", "finished")
	if !bytes.Contains(p["result"], []byte(`"done"`)) {
		t.Errorf("the completion notification lacks the result: %s", p["result"])
	}
	if n := store.records.Load() - before; n != 1 {
		t.Errorf("%d whole records read when one of %d watched tasks completed; want 1", n, len(ids))
	}
}

// The task ids one principal's open listens watch are bounded together:
// a listen that would pass the bound is refused with -32602 naming it, ids
// the caller may not see do not count, other principals have their own
// bound, and a closed listen gives its ids back.
func TestListenWatchedTasksBoundPerPrincipal(t *testing.T) {
	t.Parallel()
	store := newMemStore(t)
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, MaxWatchedPerOwner: 3}, NewRuntime(store))
	if err != nil {
		t.Fatal(err)
	}
	g.bridge.Pin(false)
	url := listenServer(t, g)
	ctx := context.Background()
	mine := func(owner string, n int) []string {
		var ids []string
		for range n {
			tk := &task.Task{ID: task.NewTaskID(), Owner: owner, Status: task.StatusCompleted, CreatedAt: runtime.Now(), UpdatedAt: runtime.Now(),
				TTL: time.Hour, Era: task.Era2026, Tool: "echo", Result: json.RawMessage(`{"content":[]}`)}
			if err := store.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, tk.ID)
		}
		return ids
	}
	alice, bob := mine("alice", 4), mine("bob", 3)
	acked := func(l *listenStream, refused *jsonrpc.Message, want int) {
		t.Helper()
		if refused != nil {
			t.Fatalf("listen refused: %s", refused.Error.Message)
		}
		m, p := l.next()
		var notes struct {
			TaskIDs []string `json:"taskIds"`
		}
		_ = json.Unmarshal(p["notifications"], &notes)
		if m.Method != "notifications/subscriptions/acknowledged" || len(notes.TaskIDs) != want {
			t.Fatalf("first message %s acknowledging %v, want %d task ids", m.Method, notes.TaskIDs, want)
		}
	}
	first, refused := openListen(t, url, "alice", alice[:2])
	acked(first, refused, 2)
	// bob's ids are not alice's to watch: one of three counts.
	l, refused := openListen(t, url, "alice", []string{bob[0], alice[2], bob[1]})
	acked(l, refused, 1)
	_, refused = openListen(t, url, "alice", alice[2:4])
	if refused == nil || refused.Error == nil || refused.Error.Code != jsonrpc.CodeInvalidParams ||
		!strings.Contains(refused.Error.Message, "limit of 3") || !strings.Contains(refused.Error.Message, "already watch 3") {
		t.Fatalf("a listen past the bound answered %+v, want -32602 naming the limit of 3", refused)
	}
	l, refused = openListen(t, url, "bob", bob)
	acked(l, refused, 3)
	// Once the first listen is closed, its two ids may be watched again.
	first.resp.Body.Close()
	waitFor(t, "the ids of a closed listen given back", func() bool {
		l, refused = openListen(t, url, "alice", alice[2:4])
		return refused == nil
	})
	acked(l, refused, 2)
}
