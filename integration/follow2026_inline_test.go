package integration

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestFollowV2026PlainClientInput: a client without the tasks extension
// calls a tool the upstream runs only as a task, and the upstream's task
// asks for input (the fixture's interview, made required). The client gets
// each round as an InputRequiredResult with a requestState, as a
// 2026-07-28 server asks a plain call; its retries' answers reach the
// upstream's task through tasks/update, and the last retry gets the
// result. Another principal cannot use the requestState, and an unknown
// one passes on to the upstream.
func TestFollowV2026PlainClientInput(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond,
		Modes: map[string]taskruntime.TaskMode{taskruntime.ToolInterview: taskruntime.ModeRequired}})
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")})
	call := func(auth string, extra map[string]any) taskRuntimeReply {
		t.Helper()
		params := map[string]any{"name": taskruntime.ToolInterview, "arguments": map[string]any{"stepMs": 0}}
		maps.Copy(params, extra)
		return sendPlainCaps(t, gw.URL, auth, "tools/call", params, map[string]any{"elicitation": map[string]any{"form": map[string]any{}}})
	}
	inputRound := func(r taskRuntimeReply, keys ...string) string {
		t.Helper()
		requests, _ := r.Result["inputRequests"].(map[string]any)
		state, _ := r.Result["requestState"].(string)
		if r.Error != nil || r.Result["resultType"] != "input_required" || state == "" || len(requests) != len(keys) {
			t.Fatalf("answer %s, want input_required asking %v with a requestState", r.raw, keys)
		}
		for _, k := range keys {
			if _, ok := requests[k]; !ok {
				t.Fatalf("answer %s lacks the input request %q", r.raw, k)
			}
		}
		return state
	}
	accept := func(key string, value any) map[string]any {
		return map[string]any{"action": "accept", "content": map[string]any{key: value}}
	}

	state := inputRound(call("Bearer pia", nil), "name", "color")
	// Another principal's retry with pia's requestState is not pia's
	// call: it passes on to the upstream as a call of its own, and pia's
	// task gets none of its answers.
	if r := call("Bearer quinn", map[string]any{"requestState": state,
		"inputResponses": map[string]any{"name": accept("name", "Mallory"), "color": accept("color", "black")}}); strings.Contains(r.raw, "Save the profile") {
		t.Errorf("another principal's retry with pia's requestState went on with pia's call: %s", r.raw)
	}
	if n := rt.Requests("tasks/update"); n != 0 {
		t.Errorf("%d tasks/update after another principal's retry, want 0", n)
	}
	state = inputRound(call("Bearer pia", map[string]any{"requestState": state,
		"inputResponses": map[string]any{"name": accept("name", "Lin"), "color": accept("color", "green")}}), "save")
	r := call("Bearer pia", map[string]any{"requestState": state, "inputResponses": map[string]any{"save": accept("save", true)}})
	if r.Error != nil || !strings.Contains(r.raw, "Hello Lin, you like green; saved: true") {
		t.Fatalf("last retry: %s, want the interview's result", r.raw)
	}
	// A requestState used once is spent: the retry passes on to the
	// upstream as a call of its own.
	if r = call("Bearer pia", map[string]any{"requestState": state, "inputResponses": map[string]any{"save": accept("save", true)}}); strings.Contains(r.raw, "Hello Lin") {
		t.Errorf("a spent requestState answered again: %s", r.raw)
	}
	// pia's upstream task (the first) took both rounds' answers, and
	// completed.
	if ids := rt.TaskIDs(taskruntime.ToolInterview); len(ids) == 0 || rt.Updates(ids[0]) != 2 {
		t.Errorf("upstream interview tasks %v, want the first answered with two tasks/update", ids)
	} else if v, _ := rt.Task(ids[0]); v.Status != taskruntime.StatusCompleted {
		t.Errorf("pia's upstream task is %s, want completed", v.Status)
	}
}

// TestFollowV2026PlainClientBadRetry: a plain client's call of a task-only
// tool that asks for input gets an InputRequiredResult; its retry with the
// requestState but without inputResponses is refused (-32602), and the
// upstream's task, which nobody can answer now, is cancelled.
func TestFollowV2026PlainClientBadRetry(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond,
		Modes: map[string]taskruntime.TaskMode{taskruntime.ToolInterview: taskruntime.ModeRequired}})
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")})
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	r := sendPlainCaps(t, gw.URL, "Bearer rae", "tools/call", map[string]any{"name": taskruntime.ToolInterview, "arguments": map[string]any{"stepMs": 0}}, caps)
	state, _ := r.Result["requestState"].(string)
	if r.Result["resultType"] != "input_required" || state == "" {
		t.Fatalf("plain call of the interview: %s, want input_required", r.raw)
	}
	r = sendPlainCaps(t, gw.URL, "Bearer rae", "tools/call", map[string]any{"name": taskruntime.ToolInterview, "arguments": map[string]any{"stepMs": 0}, "requestState": state}, caps)
	if r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("retry without inputResponses: %s, want -32602", r.raw)
	}
	ids := rt.TaskIDs(taskruntime.ToolInterview)
	if len(ids) != 1 {
		t.Fatalf("upstream interview tasks %v, want 1", ids)
	}
	waitUpstreamCancelled(t, rt, ids[0])
}
