package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Task-aware upstreams, end to end against the official TypeScript
// everything server: its simulate-research-query tool runs as a task of the
// server's own (taskSupport required upstream). The gateway owns the
// client's task and follows the upstream's one as a task client.

// tsEverythingGateway starts the TS everything server and a gateway in
// front of it (storage in store, "" for a fresh directory).
func tsEverythingGateway(t *testing.T, store string) (*gateway, string) {
	t.Helper()
	upstreamURL := startTSEverything(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	return startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store}), upstreamURL
}

// adminUpstreamTaskID returns the upstream task id the admin API shows for
// a task ("" when none).
func adminUpstreamTaskID(t *testing.T, gw *gateway, id string) string {
	t.Helper()
	var v struct {
		UpstreamTaskID string `json:"upstream_task_id"`
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK {
		t.Fatalf("admin GET task %s: %d %s", id, code, body)
	}
	return v.UpstreamTaskID
}

// upstreamTaskStatus asks the TS server directly, on the client's session
// (the gateway passes session ids through), for its task.
func upstreamTaskStatus(t *testing.T, upstreamURL, session, upstreamTaskID string) string {
	t.Helper()
	direct := newRPCClient(t, upstreamURL)
	direct.session, direct.version = session, "2025-11-25"
	var task v2025Task
	direct.result("tasks/get", map[string]string{"taskId": upstreamTaskID}, &task)
	return task.Status
}

// waitStatus polls tasks/get through the gateway until the task reaches
// want (or any terminal status, which fails the test if not want).
func waitStatus(t *testing.T, c *rpcClient, id, want string, within time.Duration) {
	t.Helper()
	waitFor(t, within, "task "+id+" "+want, func() bool {
		last := c.getTask(id)
		switch last.Status {
		case want:
			return true
		case "completed", "failed", "cancelled":
			t.Fatalf("task %s ended %s (%s), want %s", id, last.Status, last.StatusMessage, want)
		}
		return false
	})
}

// TestUpstreamTaskResearchQuery: a 2025-11-25 client calls the upstream's
// own task tool as a task through the gateway. The gateway advertises it
// required (the upstream's mode), creates the task at the upstream, follows
// it to completion, and answers the upstream's report from tasks/result
// under its own task id; the upstream task id is in the record.
func TestUpstreamTaskResearchQuery(t *testing.T) {
	t.Parallel()
	gw, upstreamURL := tsEverythingGateway(t, "")
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)

	modes := advertisedModes(c)
	// required upstream wins; forbidden upstream does not forbid the
	// gateway's own tasks (the configured default, optional, applies).
	if modes["simulate-research-query"] != "required" || modes["trigger-long-running-operation"] != "optional" {
		t.Errorf("advertised modes: simulate-research-query %q (want required), trigger-long-running-operation %q (want optional)",
			modes["simulate-research-query"], modes["trigger-long-running-operation"])
	}

	if m := c.callTool("simulate-research-query", map[string]any{"topic": "tides"}, nil); m.Error == nil || m.Error.Code != -32601 {
		t.Errorf("a plain call of a required tool = %s / %+v, want -32601", m.Result, m.Error)
	}

	task := c.createTask("simulate-research-query", map[string]any{"topic": "tides"}, 120000)
	waitStatus(t, c, task.TaskID, "completed", 60*time.Second)
	m := c.call("tasks/result", map[string]string{"taskId": task.TaskID})
	if m.Error != nil {
		t.Fatalf("tasks/result: %+v", m.Error)
	}
	var result struct {
		Content []struct{ Text string } `json:"content"`
		Meta    map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &result); err != nil || len(result.Content) == 0 || !strings.Contains(result.Content[0].Text, "Research Report: tides") {
		t.Fatalf("tasks/result = %s, want the upstream's research report", m.Result)
	}
	if got := result.Meta["io.modelcontextprotocol/related-task"].TaskID; got != task.TaskID {
		t.Errorf("tasks/result related-task = %q, want the gateway's task id %q", got, task.TaskID)
	}
	upID := adminUpstreamTaskID(t, gw, task.TaskID)
	if upID == "" || upID == task.TaskID {
		t.Fatalf("admin view upstream_task_id = %q, want the upstream's own id", upID)
	}
	if st := upstreamTaskStatus(t, upstreamURL, c.session, upID); st != "completed" {
		t.Errorf("the upstream's task %s is %q, want completed", upID, st)
	}
	// The task is the gateway's: the same caller reads it on the
	// 2026-07-28 wire too, answered by the gateway alone.
	resp, body := postV2026(t, newV2026Client(t, gw.URL, true), "tasks/get", map[string]any{"taskId": task.TaskID})
	var v2026 struct {
		Result struct {
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &v2026) != nil || v2026.Result.Status != "completed" ||
		!strings.Contains(string(v2026.Result.Result), "Research Report: tides") {
		t.Errorf("2026-07-28 tasks/get: HTTP %d %s, want the completed task with the report", resp.StatusCode, body)
	}
}

// TestUpstreamTaskElicitation: the upstream's task asks for clarification
// (elicitation/create delivered on the upstream's tasks/result). The gateway
// relays it as its task's input request on its own tasks/result stream; the
// client's answer reaches the upstream, whose report names it.
func TestUpstreamTaskElicitation(t *testing.T) {
	t.Parallel()
	gw, _ := tsEverythingGateway(t, "")
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)
	task := c.createTask("simulate-research-query", map[string]any{"topic": "python", "ambiguous": true}, 120000)
	waitStatus(t, c, task.TaskID, "input_required", 60*time.Second)

	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r1"`), "tasks/result", map[string]string{"taskId": task.TaskID})
	stream := c.open(context.Background(), body)
	defer stream.close()
	var final *jsonrpc.Message
	answered := 0
	for final == nil {
		m := stream.next()
		if m == nil {
			t.Fatal("tasks/result stream ended without the result")
		}
		switch {
		case m.IsRequest() && m.Method == "elicitation/create":
			if !strings.Contains(string(m.Params), task.TaskID) || !strings.Contains(string(m.Params), "python") {
				t.Errorf("elicitation params %s: want the upstream's question under the gateway's task id", m.Params)
			}
			answer, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"interpretation": "snake"}})
			if code := c.send(answer); code != http.StatusAccepted {
				t.Fatalf("answering the elicitation: HTTP %d", code)
			}
			answered++
		case m.IsResponse():
			final = m
		}
	}
	if answered != 1 {
		t.Errorf("answered %d elicitations, want 1", answered)
	}
	if final.Error != nil || !strings.Contains(string(final.Result), "Clarification**: snake") {
		t.Fatalf("final result = %s / %+v, want the report with the client's clarification", final.Result, final.Error)
	}
}

// TestUpstreamTaskCancel: cancelling the gateway's task cancels the
// upstream's one (tasks/cancel), as the upstream itself then reports.
func TestUpstreamTaskCancel(t *testing.T) {
	t.Parallel()
	gw, upstreamURL := tsEverythingGateway(t, "")
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)
	task := c.createTask("simulate-research-query", map[string]any{"topic": "python", "ambiguous": true}, 120000)
	var upID string
	waitFor(t, 30*time.Second, "the upstream task id recorded", func() bool {
		upID = adminUpstreamTaskID(t, gw, task.TaskID)
		return upID != ""
	})
	var cancelled v2025Task
	c.result("tasks/cancel", map[string]string{"taskId": task.TaskID}, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Fatalf("tasks/cancel = %+v", cancelled)
	}
	if st := upstreamTaskStatus(t, upstreamURL, c.session, upID); st != "cancelled" {
		t.Errorf("the upstream's task %s is %q after the gateway's cancel, want cancelled", upID, st)
	}
	if got := c.getTask(task.TaskID); got.Status != "cancelled" {
		t.Errorf("tasks/get after cancel = %+v", got)
	}

	// The same caller's 2026-07-28 tasks/cancel does the same.
	task2 := c.createTask("simulate-research-query", map[string]any{"topic": "python", "ambiguous": true}, 120000)
	var upID2 string
	waitFor(t, 30*time.Second, "the second upstream task id recorded", func() bool {
		upID2 = adminUpstreamTaskID(t, gw, task2.TaskID)
		return upID2 != ""
	})
	if resp, body := postV2026(t, newV2026Client(t, gw.URL, true), "tasks/cancel", map[string]any{"taskId": task2.TaskID}); resp.StatusCode != http.StatusOK {
		t.Fatalf("2026-07-28 tasks/cancel: HTTP %d %s", resp.StatusCode, body)
	}
	if st := upstreamTaskStatus(t, upstreamURL, c.session, upID2); st != "cancelled" {
		t.Errorf("the upstream's task %s is %q after the 2026-07-28 cancel, want cancelled", upID2, st)
	}
	if got := c.getTask(task2.TaskID); got.Status != "cancelled" {
		t.Errorf("tasks/get after the 2026-07-28 cancel = %+v", got)
	}
}

// TestUpstreamTaskRestartResume: the gateway dies while following the
// upstream's task; the restarted gateway follows it again by its recorded
// id, and the task completes with the upstream's report.
func TestUpstreamTaskRestartResume(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	gw, upstreamURL := tsEverythingGateway(t, store)
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)
	// Ambiguous: the upstream's task waits for the client's answer, so it
	// is surely still running when the gateway dies.
	task := c.createTask("simulate-research-query", map[string]any{"topic": "python", "ambiguous": true}, 120000)
	waitStatus(t, c, task.TaskID, "input_required", 60*time.Second)
	upID := adminUpstreamTaskID(t, gw, task.TaskID)
	killGateway(t, gw)

	addr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store})
	c.url = gw2.URL
	if got := c.getTask(task.TaskID); got.Status != "input_required" {
		t.Errorf("after the restart tasks/get = %+v, want input_required (the upstream still waits)", got)
	}
	if got := adminUpstreamTaskID(t, gw2, task.TaskID); got != upID {
		t.Errorf("after the restart the record names upstream task %q, want %q", got, upID)
	}
	// The elicitation the upstream sent before the crash is still the
	// task's input request; answering it lets the upstream's task finish.
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r2"`), "tasks/result", map[string]string{"taskId": task.TaskID})
	stream := c.open(context.Background(), body)
	defer stream.close()
	var final *jsonrpc.Message
	for final == nil {
		m := stream.next()
		if m == nil {
			t.Fatal("tasks/result stream ended without the result")
		}
		switch {
		case m.IsRequest() && m.Method == "elicitation/create":
			answer, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"interpretation": "comedy"}})
			if code := c.send(answer); code != http.StatusAccepted {
				t.Fatalf("answering the elicitation: HTTP %d", code)
			}
		case m.IsResponse():
			final = m
		}
	}
	if final.Error != nil || !strings.Contains(string(final.Result), "Clarification**: comedy") {
		t.Fatalf("final result after restart = %s / %+v, want the upstream's report", final.Result, final.Error)
	}
	if got := c.getTask(task.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get after restart = %+v, want completed", got)
	}
}

// TestUpstreamForbiddenToolAsGatewayTask: trigger-long-running-operation is
// forbidden as a task upstream; the gateway makes the task itself, calls the
// upstream plainly and relays its progress on tasks/result.
func TestUpstreamForbiddenToolAsGatewayTask(t *testing.T) {
	t.Parallel()
	gw, _ := tsEverythingGateway(t, "")
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)
	var list json.RawMessage
	c.result("tools/list", map[string]any{}, &list)
	m := c.call("tools/call", map[string]any{
		"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 3, "steps": 3},
		"task": map[string]any{"ttl": 60000}, "_meta": map[string]any{"progressToken": "p1"},
	})
	var created struct {
		Task v2025Task `json:"task"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("task-augmented call = %s / %+v", m.Result, m.Error)
	}
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r1"`), "tasks/result", map[string]string{"taskId": created.Task.TaskID})
	stream := c.open(context.Background(), body)
	defer stream.close()
	progress := 0
	var final *jsonrpc.Message
	for final == nil {
		m := stream.next()
		if m == nil {
			t.Fatal("tasks/result stream ended without the result")
		}
		switch {
		case m.Method == "notifications/progress":
			if !strings.Contains(string(m.Params), `"p1"`) {
				t.Errorf("progress %s lacks the client's token", m.Params)
			}
			progress++
		case m.IsResponse():
			final = m
		}
	}
	if final.Error != nil || !strings.Contains(string(final.Result), "Long running operation completed") {
		t.Fatalf("tasks/result = %s / %+v", final.Result, final.Error)
	}
	if progress == 0 {
		t.Error("no progress relayed on the tasks/result stream")
	}
	if up := adminUpstreamTaskID(t, gw, created.Task.TaskID); up != "" {
		t.Errorf("a forbidden-upstream tool's task names upstream task %q, want none (the gateway runs it)", up)
	}
}

// advertisedModes lists the tools through c and returns the
// execution.taskSupport the gateway advertises for each.
func advertisedModes(c *rpcClient) map[string]string {
	var list struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	c.result("tools/list", map[string]any{}, &list)
	modes := map[string]string{}
	for _, tool := range list.Tools {
		modes[tool.Name] = tool.Execution.TaskSupport
	}
	return modes
}
