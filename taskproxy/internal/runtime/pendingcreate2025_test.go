package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// lateV2025Upstream is a 2025-11-25 server that runs tools/call with
// params.task as a task of its own, slow to answer: it opens the call's
// event stream and sends its answer only once release is closed (or the
// call is stopped first). It records what it is told.
type lateV2025Upstream struct {
	release chan struct{}
	answer  string // "task": a CreateTaskResult naming upstreamTaskID; "plain": a CallToolResult; "error": a JSON-RPC error

	mu             sync.Mutex
	callStopped    bool     // the call's stream closed before the answer was sent
	notified       []string // params.requestId of notifications/cancelled
	cancelledTasks []string // params.taskId of tasks/cancel
}

const lateUpstreamTaskID = "upstream-task-1"

func (u *lateV2025Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch m.Method {
	case "notifications/cancelled":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		u.mu.Lock()
		u.notified = append(u.notified, string(p.RequestID))
		u.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	case "tasks/cancel":
		var p struct {
			TaskID string `json:"taskId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		u.mu.Lock()
		u.cancelledTasks = append(u.cancelledTasks, p.TaskID)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		res, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"taskId": p.TaskID, "status": "cancelled",
			"createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": nil})
		_, _ = w.Write(res)
	case "tools/call":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-u.release:
		case <-r.Context().Done():
			u.mu.Lock()
			u.callStopped = true
			u.mu.Unlock()
			return
		}
		var result any = map[string]any{"content": []any{map[string]any{"type": "text", "text": "ran plainly"}}}
		if u.answer == "task" {
			result = map[string]any{"task": map[string]any{"taskId": lateUpstreamTaskID, "status": "working",
				"createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 3600000}}
		}
		res, _ := jsonrpc.ResponseBytes(m.ID, result)
		if u.answer == "error" {
			res = jsonrpc.ErrorBytes(m.ID, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the tool failed"))
		}
		_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", res)
		w.(http.Flusher).Flush()
	default:
		http.Error(w, "unexpected "+m.Method, http.StatusBadRequest)
	}
}

// seen returns what the upstream was told so far.
func (u *lateV2025Upstream) seen() (stopped bool, notified, cancelled []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.callStopped, append([]string(nil), u.notified...), append([]string(nil), u.cancelledTasks...)
}

// startLateV2025 creates a 2025-11-25 task of a tool the upstream runs as
// a task of its own, and starts its worker on the creating call (with
// params.task) to up, on pool's runners.
func startLateV2025(t *testing.T, rt *Runtime, route *Route, pool *runners.Pool, up http.Handler) *task.Task {
	t.Helper()
	now := Now()
	tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now,
		TTL: time.Hour, Era: task.Era2025, Tool: "research", Round: 1, UpstreamTask: true, Params: json.RawMessage(`{"name":"research"}`)}
	tk.UpstreamID = jsonrpc.UpstreamCallID(tk.ID, tk.Round)
	if err := rt.Store.Create(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	base := httptest.NewRequestWithContext(runners.WithPool(context.Background(), pool), http.MethodPost, "/mcp", nil)
	base.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	run := route.NewRun(base, up)
	body, err := follow.UpstreamCallBody(tk)
	if err != nil {
		t.Fatal(err)
	}
	route.StartWorker(tk, run, upstream.StartAttempt(run.Ctx, run.Base, run.Next, tk.UpstreamID, body), nil)
	return tk
}

// A 2025-11-25 upstream that runs the tool as a task of its own answers
// the creating call (params.task) late: the gateway's task ends first (its
// client's tasks/cancel, its run_timeout, its expiry). The client sees the
// task ended at once, but the call stays open, without
// notifications/cancelled (the spec forbids it for tasks), and the task
// counts in EndedStillUpstream; the CreateTaskResult that comes then gets
// tasks/cancel for the task it names. A plain result needs no cancel, and
// an upstream silent for follow.CreateGrace has its call closed.
func TestV2025LateCreateResultCancelled(t *testing.T) {
	t.Parallel()
	ends := []struct {
		name string
		cfg  RouteConfig
		// end ends the task; ctx carries the bubble's runners, on which
		// the upstream is told.
		end     func(ctx context.Context, t *testing.T, route *Route, tk *task.Task)
		status  task.Status
		message string
	}{{
		name: "tasks/cancel",
		end: func(ctx context.Context, t *testing.T, route *Route, tk *task.Task) {
			if _, err := route.CancelTask(ctx, tk.Owner, tk.ID, nil); err != nil {
				t.Fatal(err)
			}
		},
		status: task.StatusCancelled, message: MsgCancelled,
	}, {
		// The second cancel finds the task ended: it is refused, and
		// the task counts once.
		name: "tasks/cancel twice",
		end: func(ctx context.Context, t *testing.T, route *Route, tk *task.Task) {
			if _, err := route.CancelTask(ctx, tk.Owner, tk.ID, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := route.CancelTask(ctx, tk.Owner, tk.ID, nil); !errors.Is(err, task.ErrTerminal) {
				t.Fatalf("second tasks/cancel: %v, want the task's end", err)
			}
		},
		status: task.StatusCancelled, message: MsgCancelled,
	}, {
		name:   "run_timeout",
		cfg:    RouteConfig{RunTimeout: time.Minute},
		end:    func(context.Context, *testing.T, *Route, *task.Task) { time.Sleep(time.Minute) },
		status: task.StatusFailed, message: RunTimeoutMessage(time.Minute),
	}, {
		name:   "expiry",
		end:    func(context.Context, *testing.T, *Route, *task.Task) { time.Sleep(time.Hour) },
		status: task.StatusFailed,
	}}
	answers := []struct {
		name, answer  string
		release       bool
		wantCancelled []string
		wantStopped   bool
	}{
		{name: "CreateTaskResult", answer: "task", release: true, wantCancelled: []string{lateUpstreamTaskID}},
		{name: "plain result", answer: "plain", release: true},
		{name: "error", answer: "error", release: true},
		{name: "no answer within the grace", answer: "task", wantStopped: true},
	}
	for _, e := range ends {
		for _, a := range answers {
			t.Run(e.name+"/"+a.name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					rt, route, pool := bubbleRuntime(t, e.cfg)
					up := &lateV2025Upstream{release: make(chan struct{}), answer: a.answer}
					tk := startLateV2025(t, rt, route, pool, up)
					synctest.Wait()
					e.end(runners.WithPool(context.Background(), pool), t, route, tk)
					synctest.Wait()

					rec := getTask(t, rt, tk.ID)
					if rec.Status != e.status || e.message != "" && rec.StatusMessage != e.message {
						t.Fatalf("task %s %q once ended, want %s %q", rec.Status, rec.StatusMessage, e.status, e.message)
					}
					stopped, notified, cancelled := up.seen()
					if stopped || len(notified) != 0 || len(cancelled) != 0 {
						t.Fatalf("while the answer is awaited: call stopped %v, notifications/cancelled %v, tasks/cancel %v; want none",
							stopped, notified, cancelled)
					}
					if n := rt.EndedStillUpstream(tk.Quota()); n != 1 {
						t.Fatalf("EndedStillUpstream while the answer is awaited: %d, want 1", n)
					}

					if a.release {
						close(up.release)
					} else {
						time.Sleep(follow.CreateGrace)
					}
					synctest.Wait()
					stopped, notified, cancelled = up.seen()
					if stopped != a.wantStopped || len(notified) != 0 || fmt.Sprint(cancelled) != fmt.Sprint(a.wantCancelled) {
						t.Errorf("once answered: call stopped %v, notifications/cancelled %v, tasks/cancel %v; want stopped %v, none, %v",
							stopped, notified, cancelled, a.wantStopped, a.wantCancelled)
					}
					if n := rt.EndedStillUpstream(tk.Quota()); n != 0 {
						t.Errorf("EndedStillUpstream once the worker is done: %d, want 0", n)
					}
					if rec := getTask(t, rt, tk.ID); rec.Status != e.status || rec.UpstreamTaskID != "" {
						t.Errorf("task %s (upstream task %q) after the late answer, want %s as it ended, no upstream task recorded",
							rec.Status, rec.UpstreamTaskID, e.status)
					}
				})
			})
		}
	}
}

// A worker that loses its task's lease to another replica while the
// creating call's answer is awaited reads the answer on, as for a task
// that ended: the replica that took the task over cannot follow an
// upstream task whose id it never learned, so the task the
// CreateTaskResult names is cancelled rather than run for nobody.
func TestV2025LateCreateResultCancelledOnLeaseLoss(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt, route, pool := bubbleRuntime(t, RouteConfig{})
		up := &lateV2025Upstream{release: make(chan struct{}), answer: "task"}
		tk := startLateV2025(t, rt, route, pool, up)
		synctest.Wait()
		ttl := rt.Leases.TTL()
		// Another replica finds the lease lapsed (its clock past it) and
		// takes the task over; this one's next renewal round finds it
		// held (the route is not started: no loop renews on its own).
		if _, err := rt.Store.Acquire(context.Background(), tk.Owner, tk.ID, "other-replica", Now().Add(2*ttl), ttl); err != nil {
			t.Fatalf("taking the lease over: %v", err)
		}
		leaseRenewal{rt}.round()
		synctest.Wait()

		stopped, notified, cancelled := up.seen()
		if stopped || len(notified) != 0 || len(cancelled) != 0 {
			t.Fatalf("once the lease is lost: call stopped %v, notifications/cancelled %v, tasks/cancel %v; want the answer awaited",
				stopped, notified, cancelled)
		}
		if n := rt.EndedStillUpstream(tk.Quota()); n != 1 {
			t.Fatalf("EndedStillUpstream while the answer is awaited: %d, want 1", n)
		}
		close(up.release)
		synctest.Wait()
		if _, _, cancelled = up.seen(); fmt.Sprint(cancelled) != fmt.Sprint([]string{lateUpstreamTaskID}) {
			t.Errorf("once answered: tasks/cancel %v, want %s", cancelled, lateUpstreamTaskID)
		}
		if n := rt.EndedStillUpstream(tk.Quota()); n != 0 {
			t.Errorf("EndedStillUpstream once the worker is done: %d, want 0", n)
		}
	})
}
