package runtime

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The tool's own limit wins over the route's, 0 included.
func TestRunTimeoutFor(t *testing.T) {
	t.Parallel()
	cfg := RouteConfig{RunTimeout: time.Minute, ToolRunTimeouts: map[string]time.Duration{"slow": time.Hour, "free": 0}}
	tests := []struct {
		tool string
		want time.Duration
	}{{"other", time.Minute}, {"slow", time.Hour}, {"free", 0}}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			if got := cfg.runTimeout(tt.tool); got != tt.want {
				t.Errorf("runTimeout(%q) = %s, want %s", tt.tool, got, tt.want)
			}
		})
	}
	if got := (&RouteConfig{}).runTimeout("x"); got != 0 {
		t.Errorf("no limit configured: %s, want 0", got)
	}
}

// The clock runs while the task works and stands still while it waits for
// input.
func TestRunClock(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		at     int
		paused bool
	}
	tests := []struct {
		name     string
		paused   bool
		steps    []step
		wantLeft time.Duration
	}{
		{"working throughout", false, []step{{4, false}}, 6 * time.Second},
		{"input waits do not count", false, []step{{2, true}, {100, false}, {103, false}}, 5 * time.Second},
		{"starts waiting for input", true, []step{{50, false}, {51, true}}, 9 * time.Second},
		{"spent", false, []step{{30, false}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newRunClock(10*time.Second, tt.paused, t0)
			for _, s := range tt.steps {
				c.set(s.paused, at(s.at))
			}
			if c.left != tt.wantLeft {
				t.Errorf("left %s, want %s", c.left, tt.wantLeft)
			}
		})
	}
}

// renderNothing is a view renderer for a runtime whose views are not read.
func renderNothing(*task.Task, Wire) ([]byte, error) { return []byte(`{}`), nil }

// detachClone detaches a worker's request as the gateway does by default.
func detachClone(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) }

// hangingUpstream accepts a tools/call, opens its event stream and never
// answers; it records the cancellations it is told of.
type hangingUpstream struct {
	mu        sync.Mutex
	cancelled []string // params.requestId of notifications/cancelled
	ended     chan struct{}
}

func (u *hangingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if m.Method == "notifications/cancelled" {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		u.mu.Lock()
		u.cancelled = append(u.cancelled, string(p.RequestID))
		u.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done() // the call is stopped: the stream closes
	close(u.ended)
}

func (u *hangingUpstream) cancellations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.cancelled...)
}

// bubbleRuntime returns a runtime for a test in a testing/synctest bubble,
// and a pool of runners made in the bubble for its runs (see startHanging):
// the shared pool's idle runners wait on a channel of no bubble, so the
// bubble's clock could not move while one of its runners waits there. The
// pool's idle runners end, on the bubble's clock, once the runtime closed.
func bubbleRuntime(t *testing.T, cfg RouteConfig) (*Runtime, *Route, *runners.Pool) {
	t.Helper()
	const idle = time.Minute
	t.Cleanup(func() { time.Sleep(idle + time.Second) }) // runs last: after the runtime closed
	pool := runners.NewPool(idle)
	rt := New(newMemStore(t), nil, renderNothing)
	t.Cleanup(func() { _ = rt.Close(time.Second) })
	cfg.Name, cfg.Logger, cfg.AuditLogger, cfg.Detach = "a", zap.NewNop(), zap.NewNop(), detachClone
	return rt, rt.NewRoute(cfg), pool
}

// startHanging creates a task of tool on route, status given, and starts
// its worker on a call to a hanging upstream, on pool's runners.
func startHanging(t *testing.T, rt *Runtime, route *Route, pool *runners.Pool, era task.Era, tool string, status task.Status) (*task.Task, *hangingUpstream) {
	t.Helper()
	now := Now()
	tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: status, CreatedAt: now, UpdatedAt: now, TTL: time.Hour,
		Era: era, Tool: tool, Round: 1}
	tk.UpstreamID = jsonrpc.UpstreamCallID(tk.ID, tk.Round)
	if status == task.StatusInputRequired {
		tk.AddInput(task.InputRequest{Method: "elicitation/create", Params: json.RawMessage(`{}`), UpstreamKey: "u1", Round: 1})
	}
	if err := rt.Store.Create(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	up := &hangingUpstream{ended: make(chan struct{})}
	base := httptest.NewRequestWithContext(runners.WithPool(context.Background(), pool), http.MethodPost, "/mcp", nil)
	if era == task.Era2025 {
		base.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	} else {
		base.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	}
	run := route.NewRun(base, up)
	body, err := jsonrpc.RequestBytes(tk.UpstreamID, "tools/call", map[string]any{"name": tool})
	if err != nil {
		t.Fatal(err)
	}
	var a *upstream.Attempt
	if status == task.StatusWorking {
		a = upstream.StartAttempt(run.Ctx, run.Base, run.Next, tk.UpstreamID, body)
	}
	route.StartWorker(tk, run, a, nil)
	return tk, up
}

// statusAfter lets d pass on the bubble's clock and returns the task once
// every goroutine of the bubble waits.
func statusAfter(t *testing.T, rt *Runtime, id string, d time.Duration) *task.Task {
	t.Helper()
	time.Sleep(d)
	synctest.Wait()
	return getTask(t, rt, id)
}

// A call the upstream never answers fails at its run_timeout, not a
// moment before, with a message naming the limit; the upstream's call is
// stopped (its stream closed; on 2025-11-25 it is told with
// notifications/cancelled first).
func TestRunTimeoutStopsHangingCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		era           task.Era
		route, tool   time.Duration
		wantLimit     time.Duration
		wantCancelled bool
	}{
		{"2025-11-25 route limit", task.Era2025, 90 * time.Second, -1, 90 * time.Second, true},
		{"2026-07-28 route limit", task.Era2026, 90 * time.Second, -1, 90 * time.Second, false},
		{"tool limit over the route's", task.Era2026, time.Minute, 5 * time.Minute, 5 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				cfg := RouteConfig{RunTimeout: tt.route}
				if tt.tool >= 0 {
					cfg.ToolRunTimeouts = map[string]time.Duration{"hang": tt.tool}
				}
				rt, route, pool := bubbleRuntime(t, cfg)
				tk, up := startHanging(t, rt, route, pool, tt.era, "hang", task.StatusWorking)
				if rec := statusAfter(t, rt, tk.ID, tt.wantLimit-time.Millisecond); rec.Status != task.StatusWorking {
					t.Fatalf("a moment before its limit: task %s %q, want working", rec.Status, rec.StatusMessage)
				}
				rec := statusAfter(t, rt, tk.ID, time.Millisecond)
				want := RunTimeoutMessage(tt.wantLimit)
				if rec.Status != task.StatusFailed || rec.Error == nil || rec.Error.Message != want || rec.StatusMessage != want {
					t.Fatalf("task %s %q (error %+v), want failed %q", rec.Status, rec.StatusMessage, rec.Error, want)
				}
				select {
				case <-up.ended:
				default:
					t.Fatal("the upstream call was not stopped")
				}
				got := up.cancellations()
				if tt.wantCancelled && (len(got) != 1 || got[0] != string(tk.UpstreamID)) {
					t.Errorf("notifications/cancelled for %v, want one for %s", got, tk.UpstreamID)
				}
				if !tt.wantCancelled && len(got) != 0 {
					t.Errorf("notifications/cancelled %v on 2026-07-28, where closing the stream cancels", got)
				}
			})
		})
	}
}

// Time spent waiting for the client's input does not count: a task that
// starts in input_required outlives its limit there, and fails once it has
// worked for it.
func TestRunTimeoutPausedForInput(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		limit := 90 * time.Second
		rt, route, pool := bubbleRuntime(t, RouteConfig{RunTimeout: limit})
		tk, _ := startHanging(t, rt, route, pool, task.Era2026, "hang", task.StatusInputRequired)
		if rec := statusAfter(t, rt, tk.ID, 10*limit); rec.Status != task.StatusInputRequired {
			t.Fatalf("while waiting for input: %s %q, want input_required", rec.Status, rec.StatusMessage)
		}
		// Working again (as an answer makes it), with no upstream call that
		// could end it: only the clock does, once it has run for the limit.
		if _, err := rt.Store.Update(context.Background(), "o", tk.ID, func(rec *task.Task) error {
			return rec.SetStatus(task.StatusWorking, "", Now())
		}); err != nil {
			t.Fatal(err)
		}
		rt.Hub.Changed(tk.ID)
		if rec := statusAfter(t, rt, tk.ID, limit-time.Millisecond); rec.Status != task.StatusWorking {
			t.Fatalf("a moment before its limit: task %s %q, want working", rec.Status, rec.StatusMessage)
		}
		rec := statusAfter(t, rt, tk.ID, time.Millisecond)
		if want := RunTimeoutMessage(limit); rec.Status != task.StatusFailed || rec.StatusMessage != want {
			t.Fatalf("task %s %q, want failed %q", rec.Status, rec.StatusMessage, want)
		}
	})
}
