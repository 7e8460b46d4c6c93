package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

var errInjected = errors.New("injected write failure")

// outcomeFailingStore is the real store with outcome writes (updates that
// end a task) refused while fail says so.
type outcomeFailingStore struct {
	task.Store
	fail  func(rec *task.Task) bool
	tries atomic.Int64
}

func (s *outcomeFailingStore) Update(ctx context.Context, owner, id string, fn func(*task.Task) error) (*task.Task, error) {
	return s.Store.Update(ctx, owner, id, func(rec *task.Task) error {
		if err := fn(rec); err != nil {
			return err
		}
		if rec.Status.Terminal() {
			s.tries.Add(1)
			if s.fail(rec) {
				return errInjected
			}
		}
		return nil
	})
}

// An outcome write that fails is retried; one that keeps failing leaves a
// small failure record; never does the task stay working.
func TestOutcomeWriteFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fail       func(s *outcomeFailingStore) func(*task.Task) bool
		wantStatus task.Status
		wantIn     string
	}{
		{"transient failures", func(s *outcomeFailingStore) func(*task.Task) bool {
			return func(*task.Task) bool { return s.tries.Load() <= 2 }
		}, task.StatusCompleted, `"text":"done"`},
		{"the full outcome never fits", func(*outcomeFailingStore) func(*task.Task) bool {
			return func(rec *task.Task) bool { return rec.Result != nil }
		}, task.StatusFailed, runtime.MsgOutcomeLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store := &outcomeFailingStore{Store: newMemStore(t)}
			store.fail = tt.fail(store)
			rt := NewRuntime(store)
			rt.OutcomeBackoff = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
			g, err := New(Config{DefaultTTL: time.Hour, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
			if err != nil {
				t.Fatal(err)
			}
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				msg, _ := jsonrpc.Parse(mustRead(r))
				data, _ := jsonrpc.ResponseBytes(msg.ID, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`))
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(data)
			})
			id := createV2025(t, g, next)
			rec := waitEnded(t, g, task.Anonymous, id)
			got, _ := json.Marshal(rec)
			if rec.Status != tt.wantStatus || !strings.Contains(string(got), tt.wantIn) {
				t.Errorf("task ended %s: %s; want %s with %q", rec.Status, got, tt.wantStatus, tt.wantIn)
			}
		})
	}
}

func mustRead(r *http.Request) []byte {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String())
		}
	}
}

// createV2025 creates a 2025-11-25 task through the gateway and returns
// its id.
func createV2025(t *testing.T, g *Gateway, next http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	if err := g.ServeHTTP(rec, post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{"ttl":3600000}}}`), next); err != nil {
		t.Fatal(err)
	}
	var created struct {
		Result struct {
			Task struct{ TaskID string } `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("create answer %s", rec.Body)
	}
	return created.Result.Task.TaskID
}

// answeringToolsList answers the gateway's own tools/list (the tools it
// learns before a task-augmented call) with no tools and passes every other
// request to next. A next handler that holds its calls would otherwise hold
// that tools/list too, and each create would wait out the gateway's timeout
// for learning the tools.
func answeringToolsList(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if m, err := jsonrpc.Parse(body); err == nil && m.Method == "tools/list" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"tools":[]}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// A task whose worker could not store even a failure is retried by the
// orphan loop once the store takes writes again.
func TestUnsettledTaskRetried(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	store := &outcomeFailingStore{Store: newMemStore(t), fail: func(*task.Task) bool { return broken.Load() }}
	g, id := unsettledTask(t, store, `{"content":[]}`)
	if n := g.env.Route.SettleUnsettled(context.Background()); n != 0 {
		t.Fatalf("settled %d while the store refuses", n)
	}
	broken.Store(false)
	if n := g.env.Route.SettleUnsettled(context.Background()); n != 1 {
		t.Fatalf("settled %d, want 1", n)
	}
	rec, err := g.rt.Store.Get(context.Background(), task.Anonymous, id)
	if err != nil || rec.Status != task.StatusFailed || rec.Error == nil || rec.Error.Message != runtime.MsgOutcomeLost {
		t.Errorf("task %+v, %v; want failed with %q", rec, err, runtime.MsgOutcomeLost)
	}
	if g.rt.Unsettled(id) {
		t.Error("still noted as unsettled")
	}
}

// unsettledTask creates a 2025-11-25 task on a gateway over store, whose
// upstream answers result, and waits until its worker, unable to store the
// outcome, notes the task as unsettled.
func unsettledTask(t *testing.T, store task.Store, result string) (*Gateway, string) {
	t.Helper()
	rt := NewRuntime(store)
	rt.OutcomeBackoff = []time.Duration{time.Millisecond}
	g, err := New(Config{DefaultTTL: time.Hour, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	if err != nil {
		t.Fatal(err)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, _ := jsonrpc.Parse(mustRead(r))
		data, _ := jsonrpc.ResponseBytes(msg.ID, json.RawMessage(result))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	id := createV2025(t, g, next)
	waitFor(t, "the task noted as unsettled", func() bool { return g.rt.Unsettled(id) })
	return g, id
}

func BenchmarkApplyOutcome(b *testing.B) {
	result := json.RawMessage(`{"content":[{"type":"text","text":"the answer of the tool, a few words long"}],"structuredContent":{"n":42},"isError":false}`)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		rec := &task.Task{Status: task.StatusWorking, Era: task.Era2025}
		runtime.ApplyOutcome(rec, result, nil, now)
	}
}
