package taskruntime

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestIntegralFloats: with IntegralFloats every ttlMs, pollIntervalMs,
// progress and total goes out as an integral float, as fastmcp-tasks
// writes them, and nothing else changes (ids, codes, other numbers).
func TestIntegralFloats(t *testing.T) {
	t.Parallel()
	_, url := testRuntime(t, Options{IntegralFloats: true, TTL: 15 * time.Minute, PollInterval: 5 * time.Second})
	c := newClient(t, url, true)

	created := c.call(ToolSteps, map[string]any{"steps": 2, "stepMs": 0})
	for _, want := range []string{`"ttlMs":900000.0`, `"pollIntervalMs":5000.0`, `"resultType":"task"`} {
		if !strings.Contains(string(created.body), want) {
			t.Errorf("CreateTaskResult %s lacks %s", created.body, want)
		}
	}
	if ok, _ := regexp.Match(`"id":[0-9]+[,}]`, created.body); !ok {
		t.Errorf("the request id is no longer echoed as sent: %s", created.body)
	}
	id := created.Result["taskId"].(string)
	done := c.poll(id, StatusCompleted)
	if done["ttlMs"] != float64(900000) {
		t.Errorf("completed task: ttlMs %v", done["ttlMs"])
	}
	if r := c.get(id); !strings.Contains(string(r.body), `"pollIntervalMs":5000.0`) || !strings.Contains(string(r.body), `"ttlMs":900000.0`) {
		t.Errorf("tasks/get: %s, want integral floats", r.body)
	}
	if r := c.get("no-such-task"); r.Error == nil || !strings.Contains(string(r.body), `"code":-32602,`) {
		t.Errorf("an error's code changed: %s", r.body)
	}

	// Progress of a plain call, on its SSE stream (here ending with the
	// tool's JSON-RPC error, whose code stays an integer).
	p := newClient(t, url, false)
	r := p.request("tools/call", map[string]any{"name": ToolFailJob, "arguments": map[string]any{"steps": 2, "stepMs": 0}}, func(_ http.Header, b map[string]any) {
		b["params"].(map[string]any)["_meta"].(map[string]any)["progressToken"] = "p1"
	})
	if r.status != http.StatusOK || r.Error == nil || r.Error.Code != CodeInternalError {
		t.Fatalf("plain call with progress: %d %s", r.status, r.body)
	}
	for _, want := range []string{`"progress":1.0`, `"progress":2.0`, `"total":2.0`} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("progress stream %s lacks %s", r.body, want)
		}
	}
}

// TestPickupDelay: a new task is working before its work starts, and the
// work starts once the delay has passed; a task cancelled while it waits
// ends cancelled.
func TestPickupDelay(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{PickupDelay: time.Hour})
	c := newClient(t, url, true)
	id := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	if r := c.get(id); r.Result["status"] != string(StatusWorking) || r.Result["statusMessage"] != "Task created" {
		t.Fatalf("a task not picked up: %s, want working and \"Task created\"", r.body)
	}
	if v, _ := s.Task(id); v.Step != 0 {
		t.Fatalf("the work started before the pickup: step %d", v.Step)
	}
	c.cancel(id)
	c.poll(id, StatusCancelled)

	_, url = testRuntime(t, Options{PickupDelay: 50 * time.Millisecond})
	c = newClient(t, url, true)
	id = c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	c.poll(id, StatusCompleted)
}
