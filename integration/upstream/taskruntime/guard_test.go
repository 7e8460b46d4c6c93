package taskruntime

import (
	"net/http"
	"slices"
	"testing"
)

// TestGuardedTool: the guarded tool asks its two rounds with an
// InputRequiredResult before any task, with or without the extension; the
// call sent again with the answers makes its task (which asks nothing
// again) or runs plainly. A job not confirmed ends after one round.
func TestGuardedTool(t *testing.T) {
	t.Parallel()
	for _, tasks := range []bool{true, false} {
		name := map[bool]string{true: "task", false: "plain"}[tasks]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, url := testRuntime(t, Options{})
			c := newClient(t, url, tasks)
			args := map[string]any{"steps": 2, "stepMs": 0}
			retry := func(state any, responses map[string]any) *reply {
				return c.request("tools/call", map[string]any{"name": ToolGuarded, "arguments": args,
					"requestState": state, "inputResponses": responses}, nil)
			}
			first := c.call(ToolGuarded, args)
			if first.Error != nil || first.Result["resultType"] != "input_required" || !slices.Equal(keys(first.Result["inputRequests"]), []string{"confirm"}) {
				t.Fatalf("round 1: %s", first.body)
			}
			second := retry(first.Result["requestState"], map[string]any{"confirm": accept(map[string]any{"confirm": true})})
			if second.Error != nil || second.Result["resultType"] != "input_required" || !slices.Equal(keys(second.Result["inputRequests"]), []string{"reason"}) {
				t.Fatalf("round 2: %s", second.body)
			}
			if n := s.TasksCreated(ToolGuarded); n != 0 {
				t.Fatalf("%d tasks made before the guard's answers", n)
			}
			third := retry(second.Result["requestState"], map[string]any{"reason": accept(map[string]any{"reason": "audit"})})
			want := "Guarded job for audit: 2 steps"
			switch {
			case third.Error != nil:
				t.Fatalf("round 3: %s", third.body)
			case tasks:
				if third.Result["resultType"] != "task" {
					t.Fatalf("round 3: %s, want the task", third.body)
				}
				done := c.poll(third.Result["taskId"].(string), StatusCompleted, StatusFailed, StatusInputRequired)
				if done["status"] != string(StatusCompleted) || text(done["result"]) != want {
					t.Errorf("the task: %v", done)
				}
			case text(third.Result) != want:
				t.Errorf("round 3: %s, want %q", third.body, want)
			}
			if n, wantTasks := s.TasksCreated(ToolGuarded), map[bool]int{true: 1, false: 0}[tasks]; n != wantTasks {
				t.Errorf("%d tasks made, want %d", n, wantTasks)
			}

			declined := retry(first.Result["requestState"], map[string]any{"confirm": map[string]any{"action": "decline"}})
			if declined.Error != nil {
				t.Fatalf("declined: %s", declined.body)
			}
			if !tasks && (text(declined.Result) != "Guarded job not confirmed" || declined.Result["isError"] != true) {
				t.Errorf("declined: %s", declined.body)
			}
			if bad := retry("forged.state", nil); bad.Error == nil || bad.Error.Code != CodeInvalidParams {
				t.Errorf("a forged requestState: %s, want -32602", bad.body)
			}
		})
	}
}

// TestAcceptV2025Initialize: with the option, a 2025-11-25 initialize is
// answered (no session) while server/discover still lists only
// 2026-07-28; without it, -32022 as before.
func TestAcceptV2025Initialize(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		s, url := testRuntime(t, Options{AcceptV2025Initialize: on})
		c := newClient(t, url, true)
		r := c.request("initialize", map[string]any{"protocolVersion": "2025-11-25"}, func(h http.Header, _ map[string]any) { h.Del(headerProtocolVersion) })
		switch {
		case on && (r.status != http.StatusOK || r.Error != nil || r.Result["protocolVersion"] != "2025-11-25" || r.header.Get("Mcp-Session-Id") != ""):
			t.Errorf("accepting: %d %s, want the 2025-11-25 InitializeResult without a session", r.status, r.body)
		case !on && (r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != CodeUnsupportedVersion):
			t.Errorf("not accepting: %d %s, want 400 -32022", r.status, r.body)
		}
		if n, want := s.Requests("initialize"), map[bool]int{true: 1, false: 0}[on]; n != want {
			t.Errorf("Requests(initialize) = %d, want %d", n, want)
		}
		if other := c.request("initialize", map[string]any{"protocolVersion": "2024-11-05"}, nil); other.Error == nil || other.Error.Code != CodeUnsupportedVersion {
			t.Errorf("a 2024-11-05 initialize: %s, want -32022", other.body)
		}
		d := c.request("server/discover", nil, nil)
		if v, _ := d.Result["supportedVersions"].([]any); len(v) != 1 || v[0] != ProtocolVersion {
			t.Errorf("server/discover lists %v, want only %s", d.Result["supportedVersions"], ProtocolVersion)
		}
	}
}
