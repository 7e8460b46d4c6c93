package runtime

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A task that completes drops a status message that described its work in
// progress (an upstream's, copied while its task ran), in its record and in
// the history entry of the completion, as does the gateway's note that the
// call is being re-run after a restart: a completed task reads as one that
// ran once. A failure says why it failed.
func TestCompletionStatusMessage(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		name, working string
		era           task.Era
		result        string
		rpcErr        *jsonrpc.Error
		status        task.Status
		want          string
	}{
		{"upstream's progress message", "Gathering sources...", task.Era2026, `{"content":[]}`, nil, task.StatusCompleted, ""},
		{"upstream's progress message, 2025-11-25", "Gathering sources...", task.Era2025, `{"content":[]}`, nil, task.StatusCompleted, ""},
		{"no message", "", task.Era2025, `{"content":[]}`, nil, task.StatusCompleted, ""},
		{"re-run after a restart", MsgRerun, task.Era2025, `{"content":[]}`, nil, task.StatusCompleted, ""},
		{"re-run after a replica stopped", MsgReplicaRerun, task.Era2026, `{"content":[]}`, nil, task.StatusCompleted, ""},
		{"tool error on 2026-07-28 completes", "Gathering sources...", task.Era2026, `{"isError":true,"content":[{"type":"text","text":"no"}]}`, nil, task.StatusCompleted, ""},
		{"tool error on 2025-11-25 fails", "Gathering sources...", task.Era2025, `{"isError":true,"content":[{"type":"text","text":"no"}]}`, nil, task.StatusFailed, "Tool error: no"},
		{"re-run that fails", MsgRerun, task.Era2026, "", jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream down"), task.StatusFailed, "upstream down"},
		{"re-run whose tool errs on 2025-11-25", MsgReplicaRerun, task.Era2025, `{"isError":true,"content":[{"type":"text","text":"no"}]}`, nil, task.StatusFailed, "Tool error: no"},
		{"JSON-RPC error", "Gathering sources...", task.Era2025, "", jsonrpc.Errorf(jsonrpc.CodeInternalError, "boom"), task.StatusFailed, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec := &task.Task{ID: "t", Status: task.StatusWorking, StatusMessage: c.working, Era: c.era}
			var result json.RawMessage
			if c.result != "" {
				result = json.RawMessage(c.result)
			}
			ApplyOutcome(rec, result, c.rpcErr, now)
			if rec.Status != c.status || rec.StatusMessage != c.want {
				t.Errorf("ended %s %q, want %s %q", rec.Status, rec.StatusMessage, c.status, c.want)
			}
			if n := len(rec.History); n == 0 || rec.History[n-1].Message != c.want {
				t.Errorf("history %+v, want the last change with %q", rec.History, c.want)
			}
		})
	}
}
