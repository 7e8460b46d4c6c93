package taskproxy

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Tasks taken over from a replica that stopped say so in their status
// messages, not that the gateway restarted: the re-run of a
// retry_on_restart tool, the failure of another tool, of a bridged call,
// and of a task whose route this replica does not configure.
//
//nolint:paralleltest,tparallel // the cases read the runtime the test closes when it returns
func TestTakeoverMessages(t *testing.T) {
	t.Parallel()
	store := newMemStore(t)
	ctx := t.Context()
	rt := NewRuntime(store)
	defer rt.Close(time.Second)
	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Route: "a",
		RetryOnRestart: map[string]bool{"echo": true}}, rt)
	mustStart(t, g)
	waitFor(t, "the recovery pass", func() bool { return rt.Health(ctx).Recovered })
	past := runtime.Now().Add(-time.Hour)
	orphan := func(era task.Era, session, route, tool string) string {
		id := task.NewTaskID()
		err := store.Create(ctx, &task.Task{ID: id, Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
			TTL: 24 * time.Hour, Era: era, Session: session, Tool: tool, Params: json.RawMessage(`{"name":"` + tool + `"}`),
			Lease: task.Lease{Holder: "another-replica", Expires: past}, Endpoint: "/mcp", Route: route})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	rerun, lost := orphan(task.Era2025, "", "a", "echo"), orphan(task.Era2025, "", "a", "other")
	bridged, gone := orphan(task.Era2026, "s1", "a", "other"), orphan(task.Era2025, "", "gone", "echo")
	if n, err := rt.TakeOver(runtime.Now()); n != 4 || err != nil {
		t.Fatalf("took over %d tasks (%v), want 4", n, err)
	}
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			return // the GET that gives the route its base
		}
		data, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"content":[]}`))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	_ = g.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/mcp", nil), upstream)
	for _, c := range []struct {
		name, id string
		status   task.Status
		message  string
	}{
		{"retry_on_restart tool", rerun, task.StatusCompleted, runtime.MsgReplicaRerun},
		{"other tool", lost, task.StatusFailed, runtime.MsgReplicaLost},
		{"bridged call", bridged, task.StatusFailed, runtime.MsgReplicaLost},
		{"route not configured here", gone, task.StatusFailed, runtime.MsgReplicaRouteGone},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := waitStoreStatus(t, store, "o", c.id, task.Status.Terminal)
			seen := false
			for _, h := range got.History {
				seen = seen || h.Message == c.message
			}
			if got.Status != c.status || !seen {
				t.Errorf("ended %s, history %+v; want %s with %q", got.Status, got.History, c.status, c.message)
			}
			// A completed re-run reads as a task that ran once; its
			// history keeps the re-run. A failure keeps its reason.
			final := c.message
			if c.status == task.StatusCompleted {
				final = ""
			}
			if got.StatusMessage != final {
				t.Errorf("ended %s %q, want the status message %q", got.Status, got.StatusMessage, final)
			}
		})
	}
}
