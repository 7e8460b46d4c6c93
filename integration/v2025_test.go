package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The 2025-11-25 task flows, end to end: a real Caddy binary with the module,
// a Badger directory on disk, and the go-sdk upstream on real HTTP.

const v2025Tools = `
tool greet forbidden
tool slow_compute optional
tool failing_job required
tool protocol_error_job optional
`

func v2025Setup(t *testing.T, directives string) (*rpcClient, *gateway, upstreamObserver) {
	t.Helper()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + directives})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	return c, gw, up
}

// upstreamObserver is what the tests read of the upstream's view.
type upstreamObserver interface {
	Calls(tool string) int
	Cancellations(tool string) int
	WaitCancellations(ctx context.Context, tool string, n int) error
	WaitCalls(ctx context.Context, tool string, n int) error
}

func TestV2025Discovery(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})

	direct := newRPCClient(t, "http://"+addr+"/")
	direct.initialize("")
	var directTools struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	direct.result("tools/list", nil, &directTools)

	c := newRPCClient(t, gw.URL)
	init := c.initialize("")
	var initResult struct {
		Capabilities struct {
			Tasks map[string]json.RawMessage `json:"tasks"`
			Tools json.RawMessage            `json:"tools"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(init.Result, &initResult); err != nil {
		t.Fatal(err)
	}
	caps := initResult.Capabilities
	if string(caps.Tasks["requests"]) != `{"tools":{"call":{}}}` || caps.Tasks["cancel"] == nil {
		t.Errorf("capabilities.tasks = %v, want cancel and requests.tools.call", caps.Tasks)
	}
	if _, ok := caps.Tasks["list"]; ok {
		t.Error("tasks.list advertised without authentication")
	}
	if caps.Tools == nil {
		t.Error("the upstream's tools capability was lost")
	}

	var tools struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	c.result("tools/list", nil, &tools)
	want := map[string]string{"greet": "forbidden", "slow_compute": "optional", "failing_job": "required", "protocol_error_job": "optional", "confirm_delete": "optional"}
	if len(tools.Tools) != len(directTools.Tools) || len(tools.Tools) == 0 {
		t.Fatalf("gateway lists %d tools, upstream %d", len(tools.Tools), len(directTools.Tools))
	}
	for i, tool := range tools.Tools {
		var name string
		_ = json.Unmarshal(tool["name"], &name)
		var exec struct {
			TaskSupport string `json:"taskSupport"`
		}
		_ = json.Unmarshal(tool["execution"], &exec)
		if mode, ok := want[name]; ok && exec.TaskSupport != mode {
			t.Errorf("tool %s: taskSupport %q, want %q", name, exec.TaskSupport, mode)
		}
		if exec.TaskSupport == "" {
			t.Errorf("tool %s has no execution.taskSupport", name)
		}
		for k, v := range directTools.Tools[i] {
			if k != "execution" && !bytes.Equal(v, tool[k]) {
				t.Errorf("tool %s: field %s changed: %s -> %s", name, k, v, tool[k])
			}
		}
	}
	_ = up
}

func TestV2025CreatePollResult(t *testing.T) {
	t.Parallel()
	c, _, up := v2025Setup(t, "")
	// The answer comes while the call still runs: the task is working, and
	// the upstream has not finished (it is asserted below that the result
	// comes later, from tasks/result).
	tk := c.createTask("slow_compute", map[string]any{"seconds": 1.5, "label": "e2e"}, 60000)
	if tk.Status != "working" || tk.TaskID == "" || tk.TTL == nil || *tk.TTL != 60000 || tk.PollInterval != 1000 {
		t.Fatalf("created task = %+v", tk)
	}
	for _, ts := range []string{tk.CreatedAt, tk.LastUpdatedAt} {
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil {
			t.Errorf("timestamp %q is not ISO 8601: %v", ts, err)
		}
	}
	if got := c.getTask(tk.TaskID); got.Status != "working" {
		t.Errorf("tasks/get right after create: %+v", got)
	}

	m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
	if m.Error != nil {
		t.Fatalf("tasks/result error: %v", m.Error)
	}
	var result struct {
		Content []struct{ Text string } `json:"content"`
		Meta    map[string]struct {
			TaskID string `json:"taskId"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &result); err != nil {
		t.Fatal(err)
	}
	if len(result.Content) == 0 || !strings.Contains(result.Content[0].Text, "e2e") {
		t.Errorf("tasks/result = %s, want the tool's text", m.Result)
	}
	if result.Meta["io.modelcontextprotocol/related-task"].TaskID != tk.TaskID {
		t.Errorf("tasks/result lacks related-task meta: %s", m.Result)
	}
	if got := c.getTask(tk.TaskID); got.Status != "completed" {
		t.Errorf("after the result, tasks/get = %+v", got)
	}
	if n := up.Calls("slow_compute"); n != 1 {
		t.Errorf("upstream saw %d calls, want 1", n)
	}
	// A ttl above max_ttl is capped.
	capped := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, int64(48*time.Hour/time.Millisecond))
	if *capped.TTL != int64(24*time.Hour/time.Millisecond) {
		t.Errorf("ttl %d not capped to max_ttl", *capped.TTL)
	}
}

func TestV2025Cancel(t *testing.T) {
	t.Parallel()
	c, _, up := v2025Setup(t, "")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 60}, 60000)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}
	var cancelled v2025Task
	c.result("tasks/cancel", map[string]string{"taskId": tk.TaskID}, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Fatalf("tasks/cancel answered %+v, want status cancelled", cancelled)
	}
	if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
		t.Fatalf("the upstream never saw the cancellation: %v", err)
	}
	if got := c.getTask(tk.TaskID); got.Status != "cancelled" {
		t.Errorf("tasks/get after cancel = %+v", got)
	}
	m := c.call("tasks/cancel", map[string]string{"taskId": tk.TaskID})
	if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "terminal") {
		t.Errorf("second cancel = %+v, want -32602 about the terminal status", m.Error)
	}
}

func TestV2025Failures(t *testing.T) {
	t.Parallel()
	c, _, _ := v2025Setup(t, "")
	t.Run("tool error fails the task but tasks/result is the CallToolResult", func(t *testing.T) {
		tk := c.createTask("failing_job", map[string]any{}, 60000)
		m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
		var result struct {
			IsError bool `json:"isError"`
			Content []struct{ Text string }
		}
		if m.Error != nil || json.Unmarshal(m.Result, &result) != nil || !result.IsError {
			t.Fatalf("tasks/result = %s / %v, want a CallToolResult with isError", m.Result, m.Error)
		}
		if got := c.getTask(tk.TaskID); got.Status != "failed" || got.StatusMessage == "" {
			t.Errorf("tasks/get = %+v, want failed with a message", got)
		}
	})
	t.Run("JSON-RPC error is returned as is", func(t *testing.T) {
		tk := c.createTask("protocol_error_job", map[string]any{}, 60000)
		m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
		if m.Error == nil || m.Error.Code != -32603 || m.Error.Message != "Simulated protocol error" {
			t.Fatalf("tasks/result = %s / %+v, want the upstream's -32603", m.Result, m.Error)
		}
		if got := c.getTask(tk.TaskID); got.Status != "failed" || got.StatusMessage != "Simulated protocol error" {
			t.Errorf("tasks/get = %+v", got)
		}
	})
	tests := []struct {
		name      string
		tool      string
		tk        any
		wantCode  int
		wantInMsg string
	}{
		{"forbidden tool with a task", "greet", map[string]any{}, -32601, "does not support"},
		{"required tool without a task", "failing_job", nil, -32601, "requires task augmentation"},
		{"bad task params", "slow_compute", "soon", -32602, "params.task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := c.callTool(tt.tool, map[string]any{"name": "x"}, tt.tk)
			if m.Error == nil || m.Error.Code != tt.wantCode || !strings.Contains(m.Error.Message, tt.wantInMsg) {
				t.Errorf("got %s / %+v, want %d containing %q", m.Result, m.Error, tt.wantCode, tt.wantInMsg)
			}
		})
	}
	t.Run("unknown and malformed task ids", func(t *testing.T) {
		for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			m := c.call(method, map[string]string{"taskId": task.NewTaskID()})
			if m.Error == nil || m.Error.Code != -32602 {
				t.Errorf("%s of an unknown id = %+v, want -32602", method, m.Error)
			}
			m = c.call(method, map[string]any{})
			if m.Error == nil || m.Error.Code != -32602 {
				t.Errorf("%s without taskId = %+v, want -32602", method, m.Error)
			}
		}
	})
	t.Run("tasks/list is not offered without auth", func(t *testing.T) {
		if m := c.call("tasks/list", nil); m.Error == nil || m.Error.Code != -32601 {
			t.Errorf("tasks/list = %+v, want -32601", m.Error)
		}
	})
	t.Run("a plain call passes through", func(t *testing.T) {
		m := c.callTool("greet", map[string]any{"name": "plain"}, nil)
		if m.Error != nil || !strings.Contains(string(m.Result), "Hello, plain!") {
			t.Errorf("greet = %s / %v", m.Result, m.Error)
		}
	})
}

// The elicitation the upstream sends mid-call reaches the client on the
// tasks/result stream, and the client's answer goes back to the upstream.
func TestV2025Elicitation(t *testing.T) {
	t.Parallel()
	c, _, _ := v2025Setup(t, "")
	tk := c.createTask("confirm_delete", map[string]any{"filename": "notes.txt"}, 60000)
	waitFor(t, 10*time.Second, "input_required", func() bool { return c.getTask(tk.TaskID).Status == "input_required" })

	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r1"`), "tasks/result", map[string]string{"taskId": tk.TaskID})
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
			var p struct {
				Message string `json:"message"`
				Meta    map[string]struct {
					TaskID string `json:"taskId"`
				} `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Meta["io.modelcontextprotocol/related-task"].TaskID != tk.TaskID {
				t.Errorf("elicitation lacks related-task meta: %s", m.Params)
			}
			if !strings.Contains(p.Message, "notes.txt") {
				t.Errorf("elicitation message %q", p.Message)
			}
			answer, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"confirm": true}})
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
	if final.Error != nil || !strings.Contains(string(final.Result), "Deleted notes.txt") {
		t.Fatalf("final result = %s / %+v", final.Result, final.Error)
	}
	if got := c.getTask(tk.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get = %+v", got)
	}
}

// notifications/cancelled for a plain call reaches the upstream; for a task's
// request id it never touches the task.
func TestV2025PlainCancellation(t *testing.T) {
	t.Parallel()
	c, _, up := v2025Setup(t, "")
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`777`), "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // the upstream sends no head until it has a message
		req := c.newRequest(ctx, body)
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}
	c.notify("notifications/cancelled", map[string]any{"requestId": 777, "reason": "test"})
	if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
		t.Fatalf("plain call not cancelled upstream: %v", err)
	}

	tk := c.createTask("slow_compute", map[string]any{"seconds": 1}, 60000)
	c.notify("notifications/cancelled", map[string]any{"requestId": c.nextID, "reason": "must not touch the task"})
	c.notify("notifications/cancelled", map[string]any{"requestId": "mcp-tasks:" + tk.TaskID + ":call:1"})
	m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
	if m.Error != nil || c.getTask(tk.TaskID).Status != "completed" {
		t.Errorf("task disturbed by notifications/cancelled: %s / %v", m.Result, m.Error)
	}
}

func TestBodyCapEndToEnd(t *testing.T) {
	t.Parallel()
	c, _, _ := v2025Setup(t, "max_body 1KiB")
	big := strings.Repeat("x", 2048)
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`1`), "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": big}})
	resp := c.post(context.Background(), body)
	defer resp.Body.Close()
	var m jsonrpc.Message
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestEntityTooLarge || m.Error == nil {
		t.Errorf("HTTP %d %+v, want 413 with a JSON-RPC error", resp.StatusCode, m.Error)
	}
}

// caddy reload with a task running: no Badger lock error, and the task
// carries on and completes under the new configuration.
func TestReloadWithRunningTask(t *testing.T) {
	t.Parallel()
	c, gw, _ := v2025Setup(t, "")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 2, "label": "reload"}, 60000)
	gw.reload(v2025Tools + "poll_interval 2s")
	if got := c.getTask(tk.TaskID); got.TaskID != tk.TaskID {
		t.Fatalf("task lost across reload: %+v", got)
	}
	m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
	if m.Error != nil || !strings.Contains(string(m.Result), "reload") {
		t.Fatalf("tasks/result after reload = %s / %v", m.Result, m.Error)
	}
	next := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
	if next.PollInterval != 2000 {
		t.Errorf("new config not in effect: pollInterval %d", next.PollInterval)
	}
	if strings.Contains(gw.logs(), "Cannot acquire directory lock") {
		t.Errorf("reload hit the Badger directory lock:\n%s", gw.logs())
	}
}
