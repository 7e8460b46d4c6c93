package integration

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// The 2026-07-28 tasks extension end to end: the real Caddy binary in front
// of the go-sdk upstream in stateless mode.

// v2026Client speaks the stateless wire: every request carries its version,
// method and name headers and its own _meta.
type v2026Client struct {
	*rpcClient
	declare bool // list the tasks extension in the client capabilities
	// noTaskName leaves Mcp-Name off tasks/get, tasks/update and
	// tasks/cancel, as FastMCP's tasks client does.
	noTaskName bool
	// meta holds _meta members of the client's own (a progressToken).
	meta map[string]any
}

func newV2026Client(t *testing.T, url string, declare bool) *v2026Client {
	t.Helper()
	return &v2026Client{rpcClient: newRPCClient(t, url), declare: declare}
}

func (c *v2026Client) body(method string, params map[string]any) (json.RawMessage, []byte) {
	caps := map[string]any{"elicitation": map[string]any{}}
	if c.declare {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	if params == nil {
		params = map[string]any{}
	}
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	maps.Copy(meta, c.meta)
	params["_meta"] = meta
	id := c.id()
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	return id, body
}

// request posts one call and returns its response and HTTP status.
func (c *v2026Client) request(ctx context.Context, method string, params map[string]any) (*jsonrpc.Message, int) {
	c.t.Helper()
	id, body := c.body(method, params)
	req := c.newRequest(ctx, body)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", name)
	}
	if name, ok := params["taskId"].(string); ok && !c.noTaskName {
		req.Header.Set("Mcp-Name", name)
	}
	s := c.openRequest(req, nil)
	defer s.close()
	return s.response(method, id), s.status
}

func (c *v2026Client) ok(method string, params map[string]any) map[string]json.RawMessage {
	c.t.Helper()
	m, status := c.request(context.Background(), method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: HTTP %d error %d %s", method, status, m.Error.Code, m.Error.Message)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(m.Result, &out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func (c *v2026Client) get(id string) map[string]json.RawMessage {
	c.t.Helper()
	return c.ok("tasks/get", map[string]any{"taskId": id})
}

// waitStatus polls tasks/get until the task reaches status or ends.
func (c *v2026Client) waitStatus(id, status string) map[string]json.RawMessage {
	c.t.Helper()
	var task map[string]json.RawMessage
	waitFor(c.t, 15*time.Second, "task "+id+" to be "+status, func() bool {
		task = c.get(id)
		s := str(task["status"])
		return s == status || (s != "working" && s != "input_required")
	})
	if str(task["status"]) != status {
		c.t.Fatalf("task ended %s, want %s: %v", str(task["status"]), status, task)
	}
	return task
}

func v2026Setup(t *testing.T) (*v2026Client, *gateway, upstreamObserver) {
	t.Helper()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "task_after 500ms\ntool failing_job required\ntool test_tool_with_task required"})
	return newV2026Client(t, gw.URL, true), gw, up
}

func TestV2026Discover(t *testing.T) {
	t.Parallel()
	c, _, _ := v2026Setup(t)
	res := c.ok("server/discover", nil)
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
		Tools      json.RawMessage            `json:"tools"`
		Tasks      json.RawMessage            `json:"tasks"`
	}
	_ = json.Unmarshal(res["capabilities"], &caps)
	if string(caps.Extensions["io.modelcontextprotocol/tasks"]) != "{}" || caps.Tools == nil || caps.Tasks != nil {
		t.Errorf("capabilities = %s", res["capabilities"])
	}
	for _, k := range []string{"supportedVersions", "ttlMs", "cacheScope"} {
		if res[k] == nil {
			t.Errorf("discover lost the upstream's %s: %v", k, res)
		}
	}
}

func TestV2026Conversion(t *testing.T) {
	t.Parallel()
	c, _, up := v2026Setup(t)
	t.Run("fast call has no task", func(t *testing.T) {
		res := c.ok("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "fast"}})
		if res["taskId"] != nil || str(res["resultType"]) == "task" || !strings.Contains(string(res["content"]), "Hello, fast!") {
			t.Errorf("greet = %v", res)
		}
	})
	t.Run("slow call becomes a task", func(t *testing.T) {
		// A working task: the answer came before the call ended.
		res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 2, "label": "conv"}})
		if str(res["resultType"]) != "task" || str(res["status"]) != "working" || res["ttlMs"] == nil || res["result"] != nil {
			t.Fatalf("CreateTaskResult = %v", res)
		}
		id := str(res["taskId"])
		if got := c.get(id); str(got["resultType"]) != "complete" || str(got["taskId"]) != id {
			t.Errorf("immediate tasks/get = %v", got)
		}
		done := c.waitStatus(id, "completed")
		if !strings.Contains(string(done["result"]), "conv") {
			t.Errorf("result = %s", done["result"])
		}
		if up.Calls("slow_compute") != 1 {
			t.Errorf("upstream saw %d calls, want 1 (the stream is kept, not re-run)", up.Calls("slow_compute"))
		}
	})
	t.Run("non-declaring client never gets a task", func(t *testing.T) {
		plain := newV2026Client(t, c.url, false)
		res := plain.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1}})
		if res["taskId"] != nil || !strings.Contains(string(res["content"]), "Computed") {
			t.Errorf("plain client got %v", res)
		}
		m, status := plain.request(context.Background(), "tasks/get", map[string]any{"taskId": "x"})
		if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32021 {
			t.Errorf("tasks/get without the extension: HTTP %d %+v", status, m.Error)
		}
	})
}

func TestV2026RequiredTool(t *testing.T) {
	t.Parallel()
	c, _, up := v2026Setup(t)
	res := c.ok("tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}})
	if str(res["resultType"]) != "task" {
		t.Fatalf("required tool answered %v", res)
	}
	done := c.waitStatus(str(res["taskId"]), "completed")
	if !strings.Contains(string(done["result"]), `"isError":true`) || done["error"] != nil {
		t.Errorf("tool error on this wire must be completed with the result: %v", done)
	}

	plain := newV2026Client(t, c.url, false)
	m, status := plain.request(context.Background(), "tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}})
	if status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32021 || !strings.Contains(string(m.Error.Data), "io.modelcontextprotocol/tasks") {
		t.Errorf("without the extension: HTTP %d %+v", status, m.Error)
	}
	if n := up.Calls("failing_job"); n != 1 {
		t.Errorf("upstream saw %d failing_job calls, want 1 (none for the refused one)", n)
	}
}

// A JSON-RPC error after conversion fails the task with that error.
func TestV2026FailedTask(t *testing.T) {
	t.Parallel()
	// protocol_error_job answers after ~200ms: convert before that.
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "task_after 50ms"})
	c := newV2026Client(t, gw.URL, true)
	res := c.ok("tools/call", map[string]any{"name": "protocol_error_job", "arguments": map[string]any{}})
	if str(res["resultType"]) != "task" {
		t.Fatalf("answered %v", res)
	}
	done := c.waitStatus(str(res["taskId"]), "failed")
	var e jsonrpc.Error
	if err := json.Unmarshal(done["error"], &e); err != nil || e.Code != -32603 || e.Message != "Simulated protocol error" || done["result"] != nil {
		t.Errorf("failed task = %v", done)
	}
}

func TestV2026Input(t *testing.T) {
	t.Parallel()
	c, _, up := v2026Setup(t)
	t.Run("confirm_delete", func(t *testing.T) {
		res := c.ok("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "a.txt"}})
		id := str(res["taskId"])
		// The upstream asked at once: the CreateTaskResult says so.
		if str(res["status"]) != "input_required" || str(res["resultType"]) != "task" {
			t.Errorf("CreateTaskResult = %v, want status input_required", res)
		}
		task := c.waitStatus(id, "input_required")
		var inputs map[string]struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(task["inputRequests"], &inputs)
		if len(inputs) != 1 {
			t.Fatalf("inputRequests = %s", task["inputRequests"])
		}
		if task["requestState"] != nil {
			t.Error("the upstream's requestState leaked to the client")
		}
		answers := map[string]any{}
		for k, in := range inputs {
			if in.Method != "elicitation/create" {
				t.Errorf("input %s method %s", k, in.Method)
			}
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
		}
		ack := c.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": answers})
		if len(ack) != 1 || str(ack["resultType"]) != "complete" {
			t.Errorf("tasks/update ack = %v", ack)
		}
		done := c.waitStatus(id, "completed")
		if !strings.Contains(string(done["result"]), "Deleted a.txt") {
			t.Errorf("result = %s", done["result"])
		}
	})
	t.Run("multi_input partial then full", func(t *testing.T) {
		res := c.ok("tools/call", map[string]any{"name": "multi_input", "arguments": map[string]any{}})
		id := str(res["taskId"])
		task := c.waitStatus(id, "input_required")
		var inputs map[string]json.RawMessage
		_ = json.Unmarshal(task["inputRequests"], &inputs)
		if len(inputs) != 2 {
			t.Fatalf("want 2 input requests, got %s", task["inputRequests"])
		}
		var keys []string
		for k := range inputs {
			keys = append(keys, k)
		}
		content := map[string]any{"name": "Ada", "color": "green"}
		c.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			keys[0]: map[string]any{"action": "accept", "content": content}, "never-issued": map[string]any{"action": "accept"},
		}})
		task = c.get(id)
		inputs = nil
		_ = json.Unmarshal(task["inputRequests"], &inputs)
		if str(task["status"]) != "input_required" || len(inputs) != 1 || inputs[keys[1]] == nil {
			t.Fatalf("after a partial answer: %v", task)
		}
		c.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			keys[1]: map[string]any{"action": "accept", "content": content}, keys[0]: map[string]any{"action": "decline"},
		}})
		done := c.waitStatus(id, "completed")
		if !strings.Contains(string(done["result"]), "Ada") {
			t.Errorf("result = %s", done["result"])
		}
	})
	t.Run("required tool: input before the task passes through", func(t *testing.T) {
		first := c.ok("tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}})
		if str(first["resultType"]) != "input_required" || first["taskId"] != nil {
			t.Fatalf("round 1 = %v", first)
		}
		var inputs map[string]json.RawMessage
		_ = json.Unmarshal(first["inputRequests"], &inputs)
		answers := map[string]any{}
		for k := range inputs {
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}
		}
		second := c.ok("tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{},
			"inputResponses": answers, "requestState": str(first["requestState"])})
		if str(second["resultType"]) != "task" || second["requestState"] != nil {
			t.Fatalf("round 2 = %v", second)
		}
		done := c.waitStatus(str(second["taskId"]), "completed")
		if !strings.Contains(string(done["result"]), "Alice") {
			t.Errorf("result = %s", done["result"])
		}
	})
	if n := up.Calls("confirm_delete"); n != 2 {
		t.Errorf("confirm_delete ran %d rounds upstream, want 2", n)
	}
}

func TestV2026Cancel(t *testing.T) {
	t.Parallel()
	c, _, up := v2026Setup(t)
	res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
	id := str(res["taskId"])
	ack := c.ok("tasks/cancel", map[string]any{"taskId": id})
	if len(ack) != 1 || str(ack["resultType"]) != "complete" {
		t.Errorf("cancel ack = %v", ack)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
		t.Fatalf("the upstream never saw the cancellation: %v", err)
	}
	if got := c.get(id); str(got["status"]) != "cancelled" {
		t.Errorf("after cancel: %v", got)
	}
	if ack := c.ok("tasks/cancel", map[string]any{"taskId": id}); str(ack["resultType"]) != "complete" {
		t.Errorf("second cancel = %v", ack)
	}
	m, _ := c.request(ctx, "tasks/cancel", map[string]any{"taskId": "unknown-id"})
	if m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("cancel of an unknown id = %+v", m.Error)
	}
}

// A client that closes its stream before the call became a task cancels the
// upstream call, as a plain proxy would.
func TestV2026ClientCloseBeforeConversion(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "task_after 30s"})
	c := newV2026Client(t, gw.URL, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, body := c.body("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
		req := c.newRequest(ctx, body)
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "slow_compute")
		if resp, err := httpClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := up.WaitCalls(wctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if err := up.WaitCancellations(wctx, "slow_compute", 1); err != nil {
		t.Fatalf("closing the client's stream did not cancel the upstream call: %v", err)
	}
}

// The upstream's notifications/progress on a call that became a task
// become the task's statusMessage, seen by tasks/get and by
// subscriptions/listen.
func TestV2026ProgressBecomesStatus(t *testing.T) {
	t.Parallel()
	c, _, _ := v2026Setup(t)
	c.meta = map[string]any{"progressToken": "p-1"}
	res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 4, "label": "prog"}})
	id := str(res["taskId"])
	if id == "" {
		t.Fatalf("no task: %v", res)
	}
	_, body := c.body("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	req := c.newRequest(context.Background(), body)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := sse.NewReader(resp.Body)
	var seen []string
	for {
		ev, err := events.Next()
		if err != nil {
			t.Fatalf("stream ended before the terminal notification (status messages %q): %v", seen, err)
		}
		if !ev.HasData || ev.Data == "" {
			continue
		}
		m, err := jsonrpc.Parse([]byte(ev.Data))
		if err != nil || m.Method != "notifications/tasks" {
			continue
		}
		var p struct {
			Status        string `json:"status"`
			StatusMessage string `json:"statusMessage"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.StatusMessage != "" {
			seen = append(seen, p.StatusMessage)
		}
		if p.Status == "completed" {
			break
		}
	}
	found := false
	for _, s := range seen {
		found = found || strings.HasPrefix(s, "progress ") && strings.HasSuffix(s, "/4: computing prog")
	}
	if !found {
		t.Errorf("no notifications/tasks carried the progress as its statusMessage; saw %q", seen)
	}
	if done := c.get(id); str(done["statusMessage"]) != "" {
		t.Errorf("the completed task kept the progress message %q", str(done["statusMessage"]))
	}
}

func TestV2026Subscription(t *testing.T) {
	t.Parallel()
	c, _, _ := v2026Setup(t)
	res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1.5}})
	id := str(res["taskId"])
	listenID, body := c.body("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id, "not-mine"}}})
	req := c.newRequest(context.Background(), body)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Error("listen stream lacks X-Accel-Buffering: no")
	}
	events := sse.NewReader(resp.Body)
	var first = true
	for {
		ev, err := events.Next()
		if err != nil {
			t.Fatalf("stream ended before the terminal notification: %v", err)
		}
		if !ev.HasData || ev.Data == "" {
			continue
		}
		m, err := jsonrpc.Parse([]byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Notes struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
			Meta   map[string]json.RawMessage `json:"_meta"`
			TaskID string                     `json:"taskId"`
			Status string                     `json:"status"`
			Result json.RawMessage            `json:"result"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if string(p.Meta["io.modelcontextprotocol/subscriptionId"]) != string(listenID) {
			t.Errorf("%s lacks the subscription id", ev.Data)
		}
		if first {
			if m.Method != "notifications/subscriptions/acknowledged" || len(p.Notes.TaskIDs) != 1 || p.Notes.TaskIDs[0] != id {
				t.Fatalf("first message = %s, want the acknowledgement of %s only", ev.Data, id)
			}
			first = false
			continue
		}
		if m.Method != "notifications/tasks" || p.TaskID != id {
			t.Fatalf("unexpected message %s", ev.Data)
		}
		if p.Status == "completed" {
			if !strings.Contains(string(p.Result), "Computed") {
				t.Errorf("terminal notification lacks the result: %s", ev.Data)
			}
			return
		}
	}
}
