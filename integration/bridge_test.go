package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The version bridge end to end: 2026-07-28 requests through the real Caddy
// binary in front of the official TypeScript everything server, which
// speaks 2025-11-25 only.

// bridgeClient is a 2026-07-28 client with chosen capabilities.
type bridgeClient struct {
	*rpcClient
	caps map[string]any
}

func newBridgeClient(t *testing.T, url, token string, tasks bool) *bridgeClient {
	t.Helper()
	c := &bridgeClient{rpcClient: newRPCClient(t, url), caps: map[string]any{
		"elicitation": map[string]any{"form": map[string]any{}}, "sampling": map[string]any{},
	}}
	if tasks {
		c.caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	if token != "" {
		c.header.Set("Authorization", "Bearer "+token)
	}
	return c
}

// on returns the client for the (sub)test t: failures end t, not its parent.
func (c *bridgeClient) on(t *testing.T) *bridgeClient {
	t.Helper()
	rc := *c.rpcClient
	rc.t = t
	return &bridgeClient{rpcClient: &rc, caps: c.caps}
}

// send posts one request and returns its response, the notifications
// before it, and the HTTP status.
func (c *bridgeClient) send(method string, params map[string]any) (*jsonrpc.Message, []*jsonrpc.Message, int) {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	meta, _ := params["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
	meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "bridge-e2e", "version": "1"}
	meta["io.modelcontextprotocol/clientCapabilities"] = c.caps
	params["_meta"] = meta
	id := c.id()
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	req := c.newRequest(ctx, body)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, k := range []string{"name", "taskId", "uri"} {
		if name, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", name)
		}
	}
	s := c.openRequest(req, cancel)
	defer s.close()
	var notes []*jsonrpc.Message
	for {
		m := s.next()
		if m == nil {
			c.t.Fatalf("%s: answer ended without a response (HTTP %d)", method, s.status)
		}
		if m.IsResponse() && string(m.ID) == string(id) {
			return m, notes, s.status
		}
		notes = append(notes, m)
	}
}

func (c *bridgeClient) ok(method string, params map[string]any) map[string]json.RawMessage {
	c.t.Helper()
	m, _, status := c.send(method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: HTTP %d error %d %s", method, status, m.Error.Code, m.Error.Message)
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(m.Result, &out); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// waitTask polls tasks/get until the task is in one of statuses.
func (c *bridgeClient) waitTask(id string, statuses ...string) map[string]json.RawMessage {
	c.t.Helper()
	var task map[string]json.RawMessage
	waitFor(c.t, 60*time.Second, "task "+id+" to be "+strings.Join(statuses, "|"), func() bool {
		task = c.ok("tasks/get", map[string]any{"taskId": id})
		for _, s := range statuses {
			if str(task["status"]) == s {
				return true
			}
		}
		return false
	})
	return task
}

// onlyInput returns the key and request of the single input request.
func onlyInput(t *testing.T, requests json.RawMessage) (string, string) {
	t.Helper()
	var in map[string]struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(requests, &in); err != nil || len(in) != 1 {
		t.Fatalf("inputRequests = %s, want exactly one", requests)
	}
	for k, v := range in {
		return k, v.Method
	}
	return "", ""
}

var (
	elicitAnswer = map[string]any{"action": "accept", "content": map[string]any{"name": "Bridget"}}
	sampleAnswer = map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "a bridged sample"}, "model": "e2e-model", "stopReason": "endTurn"}
)

func resultText(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("result %s: %v", result, err)
	}
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text + "\n")
	}
	return b.String()
}

func TestBridgeTSEverything(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	gw := startGateway(t, gatewayOptions{
		Upstream:   strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp"),
		Directives: "task_after 300ms\n" + hmacAuth,
	})
	checkNoRace(t, gw)
	alice := hmacToken(t, "alice", "t1")
	plain := newBridgeClient(t, gw.URL, alice, false)
	tasks := newBridgeClient(t, gw.URL, alice, true)

	t.Run("discover", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		res := plain.ok("server/discover", nil)
		var caps struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
			Tools      json.RawMessage            `json:"tools"`
			Tasks      json.RawMessage            `json:"tasks"`
		}
		_ = json.Unmarshal(res["capabilities"], &caps)
		if string(caps.Extensions["io.modelcontextprotocol/tasks"]) != "{}" || caps.Tools == nil || caps.Tasks != nil {
			t.Errorf("capabilities = %s", res["capabilities"])
		}
		if !strings.Contains(string(res["supportedVersions"]), `"2026-07-28"`) || str(res["resultType"]) != "complete" ||
			res["ttlMs"] == nil || str(res["cacheScope"]) != "private" {
			t.Errorf("discover = %v", res)
		}
		if !strings.Contains(string(res["_meta"]), "io.modelcontextprotocol/serverInfo") {
			t.Errorf("discover lacks the upstream's server info: %s", res["_meta"])
		}
	})

	t.Run("tools/list", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		res := plain.ok("tools/list", nil)
		if str(res["resultType"]) != "complete" || str(res["cacheScope"]) == "" || res["ttlMs"] == nil {
			t.Errorf("tools/list lacks the 2026-07-28 fields: resultType %s cacheScope %s ttlMs %s", res["resultType"], res["cacheScope"], res["ttlMs"])
		}
		for _, want := range []string{`"echo"`, `"trigger-long-running-operation"`, `"trigger-elicitation-request"`, `"trigger-sampling-request"`} {
			if !strings.Contains(string(res["tools"]), want) {
				t.Errorf("tools/list lacks %s", want)
			}
		}
		if strings.Contains(string(res["tools"]), `"execution"`) {
			t.Errorf("tools/list keeps the 2025-11-25 execution member")
		}
	})

	t.Run("resources, prompts and completions", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		list := plain.ok("resources/list", nil)
		var resources []struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(list["resources"], &resources)
		if str(list["resultType"]) != "complete" || str(list["cacheScope"]) == "" || list["ttlMs"] == nil || len(resources) == 0 {
			t.Fatalf("resources/list = %v", list)
		}
		read := plain.ok("resources/read", map[string]any{"uri": resources[0].URI})
		if str(read["resultType"]) != "complete" || str(read["cacheScope"]) == "" || !strings.Contains(string(read["contents"]), resources[0].URI) {
			t.Errorf("resources/read = %v", read)
		}
		if tpl := plain.ok("resources/templates/list", nil); str(tpl["resultType"]) != "complete" || str(tpl["cacheScope"]) == "" {
			t.Errorf("resources/templates/list = %v", tpl)
		}
		prompts := plain.ok("prompts/list", nil)
		if str(prompts["resultType"]) != "complete" || !strings.Contains(string(prompts["prompts"]), `"simple-prompt"`) {
			t.Errorf("prompts/list = %v", prompts)
		}
		if p := plain.ok("prompts/get", map[string]any{"name": "simple-prompt"}); str(p["resultType"]) != "complete" || p["messages"] == nil {
			t.Errorf("prompts/get = %v", p)
		}
		done := plain.ok("completion/complete", map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
			"argument": map[string]any{"name": "department", "value": "Eng"}})
		if str(done["resultType"]) != "complete" || !strings.Contains(string(done["completion"]), "Engineering") {
			t.Errorf("completion/complete = %v", done)
		}
	})

	t.Run("errors map to 2026-07-28 statuses", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		if m, _, status := plain.send("no/such-method", nil); m.Error == nil || m.Error.Code != -32601 || status != 404 {
			t.Errorf("unknown method: HTTP %d %+v, want 404 -32601", status, m.Error)
		}
		if m, _, status := plain.send("prompts/get", map[string]any{"name": "no-such-prompt"}); m.Error == nil || status != 400 {
			t.Errorf("unknown prompt: HTTP %d %+v %s, want 400", status, m.Error, m.Result)
		}
	})

	t.Run("a session the upstream dropped is re-initialized", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		solo := newBridgeClient(t, gw.URL, hmacToken(t, "carol", "t1"), false)
		solo.ok("tools/list", nil)
		re := regexp.MustCompile(`"owner":"[^"]*carol","upstream_session":"([^"]*)"`)
		// Caddy's log reaches the test through a pipe: the line may come
		// a moment after the answer.
		var found [][]string
		waitFor(t, 10*time.Second, "the log of carol's upstream session", func() bool {
			found = re.FindAllStringSubmatch(gw.logs(), -1)
			return len(found) >= 1
		})
		if len(found) != 1 {
			t.Fatalf("carol's upstream sessions = %v, want one", found)
		}
		req, _ := http.NewRequest(http.MethodDelete, upstreamURL, nil)
		req.Header.Set("Mcp-Session-Id", found[0][1])
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("DELETE of the upstream session: HTTP %d", resp.StatusCode)
		}
		res := solo.ok("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "after the drop"}})
		if !strings.Contains(resultText(t, mustJSON(res)), "after the drop") {
			t.Errorf("echo after the drop = %v", res)
		}
		waitFor(t, 10*time.Second, "the log of carol's second upstream session", func() bool {
			return len(re.FindAllStringSubmatch(gw.logs(), -1)) >= 2
		})
		if n := len(re.FindAllStringSubmatch(gw.logs(), -1)); n != 2 {
			t.Errorf("carol's upstream sessions opened = %d, want 2 (re-initialized)", n)
		}
	})

	t.Run("echo", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		res := plain.ok("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "over the bridge"}})
		if str(res["resultType"]) != "complete" || !strings.Contains(resultText(t, mustJSON(res)), "over the bridge") {
			t.Errorf("echo = %v", res)
		}
	})

	t.Run("unknown tool is an error result", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		m, _, _ := plain.send("tools/call", map[string]any{"name": "no-such-tool", "arguments": map[string]any{}})
		if m.Error == nil && !strings.Contains(string(m.Result), `"isError":true`) {
			t.Errorf("unknown tool = %s", m.Result)
		}
	})

	t.Run("progress relayed on a plain call", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		m, notes, _ := plain.send("tools/call", map[string]any{"name": "trigger-long-running-operation",
			"arguments": map[string]any{"duration": 1, "steps": 2}, "_meta": map[string]any{"progressToken": "p-1"}})
		if m.Error != nil || !strings.Contains(string(m.Result), "Long running operation completed") {
			t.Fatalf("long-running = %s %v", m.Result, m.Error)
		}
		progress := 0
		for _, n := range notes {
			if n.Method == "notifications/progress" && strings.Contains(string(n.Params), `"p-1"`) {
				progress++
			}
		}
		if progress != 2 {
			t.Errorf("relayed %d progress notifications, want 2: %v", progress, notes)
		}
	})

	t.Run("long-running as a task", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		res := tasks.ok("tools/call", map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 2, "steps": 2}})
		if str(res["resultType"]) != "task" {
			t.Fatalf("call = %v, want a task", res)
		}
		task := tasks.waitTask(str(res["taskId"]), "completed", "failed", "cancelled")
		if str(task["status"]) != "completed" || !strings.Contains(string(task["result"]), "Long running operation completed") ||
			!strings.Contains(string(task["result"]), `"resultType":"complete"`) {
			t.Errorf("task = %v", task)
		}
	})

	for _, tc := range []struct {
		tool, method string
		args         map[string]any
		answer       map[string]any
		want         string
	}{
		{"trigger-elicitation-request", "elicitation/create", map[string]any{}, elicitAnswer, "Name: Bridget"},
		{"trigger-sampling-request", "sampling/createMessage", map[string]any{"prompt": "hello", "maxTokens": 20}, sampleAnswer, "a bridged sample"},
	} {
		t.Run(tc.tool+" as a task with tasks/update", func(t *testing.T) {
			plain, tasks := plain.on(t), tasks.on(t)
			_, _ = plain, tasks
			res := tasks.ok("tools/call", map[string]any{"name": tc.tool, "arguments": tc.args})
			if str(res["resultType"]) != "task" {
				t.Fatalf("call = %v, want a task", res)
			}
			id := str(res["taskId"])
			task := tasks.waitTask(id, "input_required", "completed", "failed")
			if str(task["status"]) != "input_required" {
				t.Fatalf("task = %v, want input_required", task)
			}
			key, method := onlyInput(t, task["inputRequests"])
			if method != tc.method {
				t.Errorf("input request method %s, want %s", method, tc.method)
			}
			up := tasks.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: tc.answer}})
			if str(up["resultType"]) != "complete" {
				t.Errorf("tasks/update = %v", up)
			}
			task = tasks.waitTask(id, "completed", "failed", "cancelled")
			if str(task["status"]) != "completed" || !strings.Contains(resultText(t, task["result"]), tc.want) {
				t.Errorf("task = %v, want completed with %q", task, tc.want)
			}
		})
		t.Run(tc.tool+" as a multi-round-trip call", func(t *testing.T) {
			plain, tasks := plain.on(t), tasks.on(t)
			_, _ = plain, tasks
			params := map[string]any{"name": tc.tool, "arguments": tc.args}
			res := plain.ok("tools/call", params)
			if str(res["resultType"]) != "input_required" || str(res["requestState"]) == "" {
				t.Fatalf("call = %v, want input_required", res)
			}
			key, method := onlyInput(t, res["inputRequests"])
			if method != tc.method {
				t.Errorf("input request method %s, want %s", method, tc.method)
			}
			state := str(res["requestState"])
			retry := map[string]any{"name": tc.tool, "arguments": tc.args, "inputResponses": map[string]any{key: tc.answer}, "requestState": state}
			res = plain.ok("tools/call", retry)
			if str(res["resultType"]) != "complete" || !strings.Contains(resultText(t, mustJSON(res)), tc.want) {
				t.Errorf("retry = %v, want complete with %q", res, tc.want)
			}
			// The requestState is spent.
			again := map[string]any{"name": tc.tool, "arguments": tc.args, "inputResponses": map[string]any{key: tc.answer}, "requestState": state}
			if m, _, status := plain.send("tools/call", again); m.Error == nil || status != 400 {
				t.Errorf("a spent requestState: HTTP %d %v, want 400 -32602", status, m.Error)
			}
		})
	}

	t.Run("cancel a bridged task", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		res := tasks.ok("tools/call", map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 60, "steps": 60}})
		if str(res["resultType"]) != "task" {
			t.Fatalf("call = %v, want a task", res)
		}
		id := str(res["taskId"])
		if ack := tasks.ok("tasks/cancel", map[string]any{"taskId": id}); str(ack["resultType"]) != "complete" {
			t.Errorf("tasks/cancel = %v", ack)
		}
		if task := tasks.waitTask(id, "cancelled", "completed", "failed"); str(task["status"]) != "cancelled" {
			t.Errorf("task = %v, want cancelled", task)
		}
	})

	t.Run("principals get their own upstream sessions", func(t *testing.T) {
		plain, tasks := plain.on(t), tasks.on(t)
		_, _ = plain, tasks
		bob := newBridgeClient(t, gw.URL, hmacToken(t, "bob", "t1"), false)
		bob.ok("tools/list", nil)
		plain.ok("tools/list", nil)
		sessions := map[string]map[string]bool{} // owner -> upstream sessions
		re := regexp.MustCompile(`"owner":"([^"]*)","upstream_session":"([^"]*)"`)
		for _, m := range re.FindAllStringSubmatch(gw.logs(), -1) {
			if sessions[m[1]] == nil {
				sessions[m[1]] = map[string]bool{}
			}
			sessions[m[1]][m[2]] = true
		}
		owners := 0
		for owner := range sessions {
			if strings.HasSuffix(owner, ":alice") || strings.HasSuffix(owner, ":bob") {
				owners++
			}
		}
		if owners != 2 {
			t.Fatalf("upstream sessions by owner = %v, want alice's and bob's", sessions)
		}
		seen := map[string]string{}
		for owner, ids := range sessions {
			for id := range ids {
				if other, ok := seen[id]; ok && other != owner || id == "" {
					t.Errorf("upstream session %q serves %s and %s", id, other, owner)
				}
				seen[id] = owner
			}
		}
	})
}

// checkNoRace fails t if the gateway (when built with the race detector,
// as CADDY_BINARY may be) reported a data race.
func checkNoRace(t *testing.T, gw *gateway) {
	t.Helper()
	t.Cleanup(func() {
		if out := gw.logs(); strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("the gateway reported a data race:\n%s", out[strings.Index(out, "WARNING: DATA RACE"):])
		}
	})
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// TestBridgeOfficialClient runs the official 2026-07-28 client, pinned to
// that version, through the bridge: discover, a tool call, elicitation and
// sampling answered by its own handlers (multi-round-trip), and calls run
// as tasks by the ext-tasks requester, simulate-research-query (the server's
// own task, with and without its clarification) among them.
func TestBridgeOfficialClient(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	gw := startGateway(t, gatewayOptions{
		Upstream:   strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp"),
		Directives: "task_after 300ms",
	})
	checkNoRace(t, gw)
	out := runNodeClient(t, "ext-tasks-"+extTasksVersion+"-client-"+mcpClientVersion, "bridge-client.mjs", gw.URL,
		"@modelcontextprotocol/ext-tasks@"+extTasksVersion, "@modelcontextprotocol/client@"+mcpClientVersion)
	for _, want := range []string{
		"ERA modern",
		`DISCOVER ["2026-07-28"`, "io.modelcontextprotocol/tasks",
		"TOOLS echo,trigger-elicitation-request,trigger-long-running-operation,trigger-sampling-request",
		"echo RESULT Echo: pinned hello",
		`ELICIT "Please provide inputs`, "trigger-elicitation-request RESULT", "Name: Pinned",
		"SAMPLE", "trigger-sampling-request RESULT", "pinned sample",
		"trigger-long-running-operation TASK completed", "Long running operation completed",
		"TASK INPUT elicitation", "trigger-elicitation-request TASK completed", "Name: Tasked",
		"simulate-research-query TASK completed # Research Report: tides",
		"simulate-research-query TASK completed # Research Report: python (comedy)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client output lacks %q", want)
		}
	}
}

// TestBridgeRestart kills the gateway while bridged tasks run: one waiting
// for input, one working. Their upstream call and session died with the
// process, so after the restart both fail with the restart reason, even for
// a tool declared retry_on_restart, instead of waiting for answers that
// would reach nothing.
func TestBridgeRestart(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	store := filepath.Join(t.TempDir(), "store")
	directives := "task_after 300ms\ntool trigger-long-running-operation optional retry_on_restart"
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: directives})
	c := newBridgeClient(t, gw.URL, "", true)
	input := c.ok("tools/call", map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{}})
	working := c.ok("tools/call", map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 60, "steps": 60}})
	if str(input["resultType"]) != "task" || str(working["resultType"]) != "task" {
		t.Fatalf("calls = %v / %v, want tasks", input, working)
	}
	c.waitTask(str(input["taskId"]), "input_required")
	killGateway(t, gw)

	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: directives})
	checkNoRace(t, gw2)
	c2 := newBridgeClient(t, gw2.URL, "", true)
	for _, id := range []string{str(input["taskId"]), str(working["taskId"])} {
		task := c2.waitTask(id, "failed", "completed", "cancelled")
		if str(task["status"]) != "failed" || !strings.Contains(string(task["error"]), "gateway restarted") {
			t.Errorf("task %s after the restart = %s, want failed with the restart reason", id, mustJSON(task))
		}
	}
}

// TestBridgeLimits: one principal's calls waiting for input, and its
// requests with ever other capability contents, take nothing from another
// principal's; a retry must name the waiting call's tool (else a retry
// could answer another tool's input).
func TestBridgeLimits(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	gw := startGateway(t, gatewayOptions{
		Upstream:   strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp"),
		Directives: "task_after 300ms\nmax_active_per_principal 3\n" + hmacAuth,
	})
	checkNoRace(t, gw)
	bob := newBridgeClient(t, gw.URL, hmacToken(t, "bob", "t1"), false)
	alice := newBridgeClient(t, gw.URL, hmacToken(t, "alice", "t1"), false)
	elicit := map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{}}
	park := func(c *bridgeClient) (string, string) {
		t.Helper()
		res := c.ok("tools/call", map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{}})
		if str(res["resultType"]) != "input_required" || str(res["requestState"]) == "" {
			t.Fatalf("call = %v, want input_required", res)
		}
		key, _ := onlyInput(t, res["inputRequests"])
		return str(res["requestState"]), key
	}
	var bobStates, bobKeys []string
	for range 3 {
		state, key := park(bob)
		bobStates, bobKeys = append(bobStates, state), append(bobKeys, key)
	}
	if m, _, _ := bob.send("tools/call", elicit); m.Error == nil || m.Error.Code != -32000 || !strings.Contains(m.Error.Message, "limit 3") {
		t.Errorf("bob's fourth call waiting for input: %s %+v, want -32000 naming the limit", m.Result, m.Error)
	}
	state, key := park(alice)
	res := alice.ok("tools/call", map[string]any{"name": "trigger-elicitation-request", "arguments": map[string]any{},
		"inputResponses": map[string]any{key: elicitAnswer}, "requestState": state})
	if !strings.Contains(resultText(t, mustJSON(res)), "Name: Bridget") {
		t.Errorf("alice's retry = %v", res)
	}

	t.Run("a retry naming another tool", func(t *testing.T) {
		bob := bob.on(t)
		retry := func(name string) (*jsonrpc.Message, int) {
			m, _, status := bob.send("tools/call", map[string]any{"name": name, "arguments": map[string]any{"message": "x"},
				"inputResponses": map[string]any{bobKeys[0]: elicitAnswer}, "requestState": bobStates[0]})
			return m, status
		}
		if m, status := retry("echo"); m.Error == nil || m.Error.Code != -32602 || status != 400 {
			t.Errorf("retry as echo: HTTP %d %s %+v, want 400 -32602", status, m.Result, m.Error)
		}
		if m, _ := retry("trigger-elicitation-request"); m.Error != nil || !strings.Contains(resultText(t, m.Result), "Name: Bridget") {
			t.Errorf("retry of the call: %s %+v, want its result", m.Result, m.Error)
		}
	})

	t.Run("capability contents do not multiply sessions", func(t *testing.T) {
		opened := func(who string) int {
			return len(regexp.MustCompile(`"owner":"[^"]*:`+who+`","upstream_session":"`).FindAllString(gw.logs(), -1))
		}
		bob := newBridgeClient(t, gw.URL, hmacToken(t, "bob", "t1"), false)
		before, aliceBefore := opened("bob"), opened("alice")
		for i := range 20 {
			bob.caps["roots"] = map[string]any{"x" + string(rune('a'+i)): 1}
			bob.ok("tools/list", nil)
		}
		if n := opened("bob") - before; n != 1 {
			t.Errorf("bob's 20 tools/list with other roots contents opened %d sessions, want 1", n)
		}
		alice.on(t).ok("tools/list", nil)
		if n := opened("alice"); n != aliceBefore || n != 1 {
			t.Errorf("alice's sessions opened %d (before bob's %d), want her one session kept", n, aliceBefore)
		}
	})
}
