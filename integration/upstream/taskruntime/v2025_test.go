package taskruntime

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// v2025Client speaks 2025-11-25 to the runtime in its 2025-11-25 mode.
type v2025Client struct {
	t   *testing.T
	url string
	id  atomic.Int64
}

// v2025Reply is one answer, decoded.
type v2025Reply struct {
	status int
	Result map[string]any
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

func (c *v2025Client) call(method string, params any) v2025Reply {
	c.t.Helper()
	return c.callVersion(method, params, v2025Version)
}

// callVersion sends the request with MCP-Protocol-Version version.
func (c *v2025Client) callVersion(method string, params any, version string) v2025Reply {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, _ := http.NewRequestWithContext(waitCtx(c.t), http.MethodPost, c.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(headerProtocolVersion, version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := v2025Reply{status: resp.StatusCode}
	if err := json.Unmarshal(raw, &r); err != nil {
		c.t.Fatalf("%s: %d %s: %v", method, resp.StatusCode, raw, err)
	}
	return r
}

// TestV2025Tasks: in the 2025-11-25 mode the runtime is a task-aware
// 2025-11-25 server: it refuses 2026-07-28, declares task-augmented
// tools/call, lists each tool's taskSupport, answers a call with
// params.task with the CreateTaskResult (held as on 2026-07-28), and
// serves tasks/get, tasks/result and tasks/cancel.
func TestV2025Tasks(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{V2025Tasks: true})
	c := &v2025Client{t: t, url: url}

	if r := c.callVersion("server/discover", map[string]any{}, ProtocolVersion); r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != -32000 {
		t.Errorf("a 2026-07-28 server/discover: %d %+v, want 400 -32000", r.status, r.Error)
	}
	init := c.call("initialize", map[string]any{"protocolVersion": v2025Version, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
	if caps, _ := json.Marshal(init.Result["capabilities"]); !strings.Contains(string(caps), `"requests":{"tools":{"call":{}}}`) {
		t.Errorf("initialize capabilities %s, want task-augmented tools/call", caps)
	}
	var list struct {
		Tools []struct {
			Name      string
			Execution struct{ TaskSupport string }
		}
	}
	raw, _ := json.Marshal(c.call("tools/list", map[string]any{}).Result)
	_ = json.Unmarshal(raw, &list)
	modes := map[string]string{}
	for _, tool := range list.Tools {
		modes[tool.Name] = tool.Execution.TaskSupport
	}
	if modes[ToolSteps] != "required" || modes[ToolEcho] != "forbidden" || modes[ToolFailJob] != "optional" || len(modes) != 3 {
		t.Errorf("tools/list task modes %v", modes)
	}
	if r := c.call("tools/call", map[string]any{"name": ToolSteps, "arguments": map[string]any{}}); r.Error == nil || r.Error.Code != CodeMethodNotFound {
		t.Errorf("a plain call of a required tool: %+v, want -32601", r.Error)
	}
	if r := c.call("tools/call", map[string]any{"name": ToolEcho, "arguments": map[string]any{"text": "hi"}}); r.Error != nil {
		t.Errorf("a plain call of echo: %+v", r.Error)
	}

	s.HoldAnswers(ToolSteps)
	answered := make(chan v2025Reply, 1)
	go func() {
		answered <- c.call("tools/call", map[string]any{"name": ToolSteps, "arguments": map[string]any{"steps": 1, "stepMs": 0}, "task": map[string]any{"ttl": 60000}})
	}()
	ids, err := s.WaitTaskIDs(waitCtx(t), ToolSteps, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.ReleaseAnswers(ToolSteps)
	created := <-answered
	tk, _ := created.Result["task"].(map[string]any)
	if tk["taskId"] != ids[0] || tk["status"] != "working" || tk["createdAt"] == nil || tk["ttl"] == nil {
		t.Fatalf("CreateTaskResult %+v, want the task %s working", created.Result, ids[0])
	}
	res := c.call("tasks/result", map[string]any{"taskId": ids[0]})
	if text, _ := json.Marshal(res.Result); !strings.Contains(string(text), "Completed 1 steps") || !strings.Contains(string(text), ids[0]) {
		t.Errorf("tasks/result %s, want the result with the related task", text)
	}
	if g := c.call("tasks/get", map[string]any{"taskId": ids[0]}); g.Result["status"] != "completed" || g.Result["taskId"] != ids[0] {
		t.Errorf("tasks/get %+v, want completed", g.Result)
	}
	if r := c.call("tasks/cancel", map[string]any{"taskId": ids[0]}); r.Error == nil || r.Error.Code != CodeInvalidParams {
		t.Errorf("tasks/cancel of a completed task: %+v, want -32602", r.Error)
	}

	long := c.call("tools/call", map[string]any{"name": ToolSteps, "arguments": map[string]any{"steps": 1000, "stepMs": 100}, "task": map[string]any{}})
	id, _ := long.Result["task"].(map[string]any)["taskId"].(string)
	if r := c.call("tasks/cancel", map[string]any{"taskId": id}); r.Result["status"] != "cancelled" {
		t.Fatalf("tasks/cancel %+v, want the task cancelled at once", r)
	}
	if v, _ := s.Task(id); v.Status != StatusCancelled || !v.CancelRequested {
		t.Errorf("after tasks/cancel: %s, cancel requested %v", v.Status, v.CancelRequested)
	}
	if r := c.call("tasks/result", map[string]any{"taskId": id}); r.Error == nil {
		t.Errorf("tasks/result of a cancelled task: %+v, want an error", r.Result)
	}
}
