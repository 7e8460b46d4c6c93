package replicatest

import (
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Input answers that land on a replica other than the worker's, for tasks
// whose upstream call speaks 2025-11-25: the answer must reach the upstream
// as the worker would send it (on the task's session, as 2025-11-25,
// without the caller's 2026-07-28 routing headers), whatever wire the
// client answered on.

// A 2025-11-25 task on replica A asks for input; a 2026-07-28 client
// answers it with tasks/update on replica B, which sends the answer to the
// upstream on the task's 2025-11-25 session; the task completes.
func TestLegacyTaskAnsweredByModernUpdateOnAnotherReplica(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, only string
	}{
		{"upstream speaks both", ""},
		{"upstream speaks 2025-11-25 only", "2025-11-25"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixtureOf(t, tt.only)
			a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
			session := legacySession(t, a.url)
			id := legacyTask(t, a.url, session, upstream.ToolConfirmDelete, map[string]any{"filename": "c.txt"})
			answerOn(t, b, id)
			tk := waitEnded(t, b, id)
			if tk.Status != task.StatusCompleted || !strings.Contains(string(tk.Result), "Deleted c.txt") {
				t.Fatalf("task ended %s: %s %+v", tk.Status, tk.Result, tk.Error)
			}
		})
	}
}

// A 2026-07-28 call through replica A's version bridge (the upstream
// speaks 2025-11-25 or an older version only) becomes a task waiting for
// input; the tasks/update on replica B reaches the upstream on A's
// upstream session, with the version that session negotiated, and the
// task completes.
func TestBridgedTaskAnsweredOnAnotherReplica(t *testing.T) {
	t.Parallel()
	for _, only := range []string{"2025-11-25", "2025-06-18"} {
		t.Run(only, func(t *testing.T) {
			t.Parallel()
			f := newFixtureOf(t, only)
			a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
			id := modernTask(t, a.url, upstream.ToolConfirmDelete, map[string]any{"filename": "d.txt"})
			if a.stored(t, id).Session == "" {
				t.Fatal("the task was not bridged: it has no upstream session")
			}
			answerOn(t, b, id)
			tk := waitEnded(t, b, id)
			if tk.Status != task.StatusCompleted || !strings.Contains(string(tk.Result), "Deleted d.txt") {
				t.Fatalf("task ended %s: %s %+v", tk.Status, tk.Result, tk.Error)
			}
		})
	}
}

// waitEnded waits for task id to end and returns it, read through r.
func waitEnded(t *testing.T, r *replica, id string) *task.Task {
	t.Helper()
	var tk *task.Task
	waitFor(t, "the task to end", func() bool {
		tk = r.stored(t, id)
		return tk.Status.Terminal()
	})
	return tk
}
