package taskproxy

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A task that completes drops a status message that described its work in
// progress (an upstream's, copied while its task ran), in its record and in
// the history entry of the completion; the gateway's re-run notes stay. A
// failure says why it failed.
func TestCompletionStatusMessage(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name, working string
		era           Era
		result        string
		rpcErr        *jsonrpc.Error
		status        Status
		want          string
	}{
		{"upstream's progress message", "Gathering sources...", EraModern, `{"content":[]}`, nil, StatusCompleted, ""},
		{"upstream's progress message, 2025-11-25", "Gathering sources...", EraLegacy, `{"content":[]}`, nil, StatusCompleted, ""},
		{"no message", "", EraLegacy, `{"content":[]}`, nil, StatusCompleted, ""},
		{"re-run after a restart", msgRerun, EraLegacy, `{"content":[]}`, nil, StatusCompleted, msgRerun},
		{"re-run after a replica stopped", msgReplicaRerun, EraModern, `{"content":[]}`, nil, StatusCompleted, msgReplicaRerun},
		{"tool error on 2026-07-28 completes", "Gathering sources...", EraModern, `{"isError":true,"content":[{"type":"text","text":"no"}]}`, nil, StatusCompleted, ""},
		{"tool error on 2025-11-25 fails", "Gathering sources...", EraLegacy, `{"isError":true,"content":[{"type":"text","text":"no"}]}`, nil, StatusFailed, "Tool error: no"},
		{"JSON-RPC error", "Gathering sources...", EraLegacy, "", jsonrpc.Errorf(jsonrpc.CodeInternalError, "boom"), StatusFailed, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &Task{ID: "t", Status: StatusWorking, StatusMessage: c.working, Era: c.era}
			var result json.RawMessage
			if c.result != "" {
				result = json.RawMessage(c.result)
			}
			applyOutcome(rec, result, c.rpcErr, now)
			if rec.Status != c.status || rec.StatusMessage != c.want {
				t.Errorf("ended %s %q, want %s %q", rec.Status, rec.StatusMessage, c.status, c.want)
			}
			if n := len(rec.History); n == 0 || rec.History[n-1].Message != c.want {
				t.Errorf("history %+v, want the last change with %q", rec.History, c.want)
			}
		})
	}
}
