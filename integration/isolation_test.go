package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Principal binding end to end: principals A and B share tenant t1, C is in
// tenant t2. A creates tasks in both eras; B and C must see them exactly as
// ids that never existed, on every method of both eras.

// rawAnswer is an HTTP answer reduced to what a client can observe.
type rawAnswer struct {
	status int
	body   string
}

// postRaw sends body with the headers and returns status and body; for an
// event stream only the first event is read (subscriptions never end).
func postRaw(t *testing.T, url, token, session string, headers map[string]string, body string) rawAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var event bytes.Buffer
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() == "" && event.Len() > 0 {
				break
			}
			event.WriteString(sc.Text() + "\n")
		}
		return rawAnswer{resp.StatusCode, event.String()}
	}
	data, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, string(data)}
}

func v2026Body(id int, method string, params map[string]any) string {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	b, _ := jsonrpc.RequestBytes(json.RawMessage(fmt.Sprint(id)), method, params)
	return string(b)
}

func v2026Headers(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

func TestPrincipalIsolation(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "task_after 200ms\n" + hmacAuth})
	tokens := map[string]string{"A": hmacToken(t, "alice", "t1"), "B": hmacToken(t, "bob", "t1"), "C": hmacToken(t, "carol", "t2")}

	// A's tasks: a legacy one waiting for input, and a modern one.
	a := newRPCClient(t, gw.URL)
	a.header.Set("Authorization", "Bearer "+tokens["A"])
	a.initialize("")
	v2025Task := a.createTask("confirm_delete", map[string]any{"filename": "secret.txt"}, 60000)
	waitFor(t, 10*time.Second, "input_required", func() bool { return a.getTask(v2025Task.TaskID).Status == "input_required" })
	am := newV2026Client(t, gw.URL, true)
	am.header.Set("Authorization", "Bearer "+tokens["A"])
	v2026Task := str(am.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 30}})["taskId"])

	sessions := map[string]string{}
	for _, who := range []string{"B", "C"} {
		c := newRPCClient(t, gw.URL)
		c.header.Set("Authorization", "Bearer "+tokens[who])
		c.initialize("")
		sessions[who] = c.session
	}
	sessions["A"] = a.session

	type probe struct {
		name string
		send func(who, taskID string) rawAnswer
	}
	v2025 := func(method string, params func(id string) map[string]any) func(who, id string) rawAnswer {
		return func(who, id string) rawAnswer {
			body, _ := jsonrpc.RequestBytes(json.RawMessage(`77`), method, params(id))
			return postRaw(t, gw.URL, tokens[who], sessions[who], nil, string(body))
		}
	}
	byID := func(id string) map[string]any { return map[string]any{"taskId": id} }
	probes := []probe{
		{"legacy tasks/get", v2025("tasks/get", byID)},
		{"legacy tasks/result", v2025("tasks/result", byID)},
		{"legacy tasks/cancel", v2025("tasks/cancel", byID)},
		{"legacy input answer", func(who, id string) rawAnswer {
			body := `{"jsonrpc":"2.0","id":"mcp-tasks:` + id + `:input:1","result":{"action":"accept","content":{"confirm":true}}}`
			return postRaw(t, gw.URL, tokens[who], sessions[who], nil, body)
		}},
		{"modern tasks/get", func(who, id string) rawAnswer {
			return postRaw(t, gw.URL, tokens[who], "", v2026Headers("tasks/get", id), v2026Body(78, "tasks/get", byID(id)))
		}},
		{"modern tasks/update", func(who, id string) rawAnswer {
			p := map[string]any{"taskId": id, "inputResponses": map[string]any{"1": map[string]any{"action": "accept"}}}
			return postRaw(t, gw.URL, tokens[who], "", v2026Headers("tasks/update", id), v2026Body(79, "tasks/update", p))
		}},
		{"modern tasks/cancel", func(who, id string) rawAnswer {
			return postRaw(t, gw.URL, tokens[who], "", v2026Headers("tasks/cancel", id), v2026Body(80, "tasks/cancel", byID(id)))
		}},
		{"modern subscriptions/listen", func(who, id string) rawAnswer {
			p := map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}
			return postRaw(t, gw.URL, tokens[who], "", v2026Headers("subscriptions/listen", ""), v2026Body(81, "subscriptions/listen", p))
		}},
	}
	attempts, accepted := 0, 0
	for _, tk := range []string{v2025Task.TaskID, v2026Task} {
		unknown := task.NewTaskID()
		for _, p := range probes {
			for _, who := range []string{"B", "C"} {
				t.Run(fmt.Sprintf("%s by %s on %s", p.name, who, tk[:6]), func(t *testing.T) {
					attempts++
					foreign, never := p.send(who, tk), p.send(who, unknown)
					if foreign.status != never.status || strings.ReplaceAll(foreign.body, tk, unknown) != never.body {
						accepted++
						t.Errorf("A's task answers differently from an unknown id:\nforeign %d %s\nunknown %d %s", foreign.status, foreign.body, never.status, never.body)
					}
					if strings.Contains(foreign.body, `"status"`) || strings.Contains(foreign.body, "secret.txt") {
						accepted++
						t.Errorf("the answer reveals the task: %s", foreign.body)
					}
				})
			}
		}
	}
	t.Logf("forged accesses tried: %d, accepted: %d", attempts, accepted)

	t.Run("lists", func(t *testing.T) {
		for _, who := range []string{"B", "C"} {
			ans := postRaw(t, gw.URL, tokens[who], sessions[who], nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`)
			if ans.status != 200 || !strings.Contains(ans.body, `"tasks":[]`) {
				t.Errorf("%s lists %s", who, ans.body)
			}
		}
		ans := postRaw(t, gw.URL, tokens["A"], sessions["A"], nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`)
		if !strings.Contains(ans.body, v2025Task.TaskID) || !strings.Contains(ans.body, v2026Task) {
			t.Errorf("A's list lacks A's tasks: %s", ans.body)
		}
	})
	t.Run("another principal's session is unknown", func(t *testing.T) {
		ans := postRaw(t, gw.URL, tokens["B"], sessions["A"], nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if ans.status != http.StatusNotFound {
			t.Errorf("B on A's session: HTTP %d %s, want 404", ans.status, ans.body)
		}
	})
	t.Run("the owner still succeeds", func(t *testing.T) {
		if got := a.getTask(v2025Task.TaskID); got.Status != "input_required" {
			t.Errorf("A's legacy task disturbed: %+v", got)
		}
		if got := am.get(v2026Task); str(got["status"]) != "working" {
			t.Errorf("A's modern task disturbed: %v", got)
		}
		cross := am.get(v2025Task.TaskID) // a legacy task read over the modern wire
		if str(cross["status"]) != "input_required" || cross["inputRequests"] == nil {
			t.Errorf("A reading the legacy task over 2026-07-28: %v", cross)
		}
		am.ok("tasks/cancel", map[string]any{"taskId": v2026Task})
		if got := a.getTask(v2026Task); got.Status != "cancelled" { // and the modern one over 2025-11-25
			t.Errorf("A's modern task over 2025-11-25 after cancel: %+v", got)
		}
	})
	if strings.Contains(gw.logs(), tokens["A"]) || strings.Contains(gw.logs(), tokens["B"]) {
		t.Error("a token appears in Caddy's log")
	}
}

func TestQuotaAndRateLimit(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	// rate_limit 3 (bursts of 6): the initialize and the four creates fit,
	// so the fourth is refused for the quota, not the rate.
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "max_active_per_principal 3\nrate_limit 3"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	for range 3 {
		c.createTask("slow_compute", map[string]any{"seconds": 30}, 60000)
	}
	m := c.callTool("slow_compute", map[string]any{"seconds": 30}, map[string]any{"ttl": 60000})
	if m.Error == nil || m.Error.Code != -32000 || !strings.Contains(m.Error.Message, "too many active tasks (limit 3)") {
		t.Errorf("4th task = %s / %+v, want -32000", m.Result, m.Error)
	}

	limited := 0
	for i := range 20 {
		body, _ := jsonrpc.RequestBytes(json.RawMessage(fmt.Sprint(100+i)), "tasks/get", map[string]string{"taskId": "x"})
		resp := c.post(context.Background(), body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			limited++
			if resp.Header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
		}
	}
	if limited == 0 {
		t.Error("a burst of 20 task operations at rate_limit 3 was never limited")
	}
	// Plain traffic is not a task operation.
	if m := c.callTool("greet", map[string]any{"name": "x"}, nil); m.Error != nil {
		t.Errorf("plain call limited: %+v", m.Error)
	}

	// The same, as Prometheus metrics on Caddy's admin endpoint.
	metrics := gw.metrics()
	for _, want := range []string{
		`caddy_mcp_tasks_created_total{era="2025-11-25"} 3`,
		`caddy_mcp_tasks_refused_total{reason="quota"} 1`,
		`caddy_mcp_tasks_workers_running 3`,
		fmt.Sprintf(`caddy_mcp_tasks_refused_total{reason="rate_limit"} %d`, limited),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "caddy_mcp_tasks"))
		}
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// The audit log tells one task's lifecycle with the principal and never
// carries a token, an argument or a result.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth, SiteDirectives: "log"})
	token := hmacToken(t, "alice", "t1")
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+token)
	c.initialize("")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 0.2, "label": "confidential-arg"}, 60000)
	c.call("tasks/result", map[string]string{"taskId": tk.TaskID})

	other := newRPCClient(t, gw.URL)
	other.header.Set("Authorization", "Bearer "+hmacToken(t, "mallory", "t1"))
	other.initialize("")
	other.call("tasks/get", map[string]string{"taskId": tk.TaskID})

	want := map[string]bool{"task created": false, "task retrieved": false, "task completed": false, "access denied": false}
	// The denial is the last event: tasks/result may add a second
	// "task retrieved" (the result, when it came while it waited).
	waitFor(t, 5*time.Second, "audit lines", func() bool { return strings.Contains(gw.logs(), `"msg":"access denied"`) })
	for line := range strings.SplitSeq(gw.logs(), "\n") {
		if !strings.Contains(line, `"logger":"http.handlers.mcp_tasks.audit"`) {
			continue
		}
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		msg, _ := entry["msg"].(string)
		if _, ok := want[msg]; ok {
			want[msg] = true
		}
		if entry["task"] != tk.TaskID || entry["tenant"] != "t1" {
			t.Errorf("audit line lacks task or tenant: %s", line)
		}
		if msg != "access denied" && (entry["principal"] != "alice" || entry["tool"] != "slow_compute" || entry["duration"] == nil) {
			t.Errorf("audit line lacks principal, tool or duration: %s", line)
		}
		if msg == "access denied" && entry["principal"] != "mallory" {
			t.Errorf("denial names %v, want mallory", entry["principal"])
		}
		for _, secret := range []string{token, "confidential-arg", "Computed"} {
			if strings.Contains(line, secret) {
				t.Errorf("audit line carries %q: %s", secret, line)
			}
		}
	}
	for msg, seen := range want {
		if !seen {
			t.Errorf("no %q audit line in:\n%s", msg, gw.logs())
		}
	}
	if strings.Contains(gw.logs(), token) {
		t.Error("the token appears in Caddy's log")
	}
	metrics := gw.metrics()
	for _, want := range []string{
		`caddy_mcp_tasks_ended_total{era="2025-11-25",status="completed"} 1`,
		`caddy_mcp_tasks_duration_seconds_count{era="2025-11-25",status="completed"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, grepLines(metrics, "caddy_mcp_tasks"))
		}
	}
	// The access log names the caller: the subject is {http.auth.user.id}.
	if !strings.Contains(gw.logs(), `"user_id":"alice"`) {
		t.Errorf("no access log line with user_id alice in:\n%s", gw.logs())
	}
}

// principal {http.auth.user.id} takes the caller from an earlier Caddy auth
// handler, here basic_auth.
func TestPrincipalPlaceholder(t *testing.T) {
	t.Parallel()
	hash, err := exec.Command(caddyBinary, "hash-password", "--plaintext", "pw").Output()
	if err != nil {
		t.Fatal(err)
	}
	h := strings.TrimSpace(string(hash))
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{
		Upstream:       addr,
		SiteDirectives: "basic_auth /mcp* {\nalice " + h + "\nbob " + h + "\n}",
		Directives:     v2025Tools + "principal {http.auth.user.id}",
	})
	clientFor := func(user string) *rpcClient {
		c := newRPCClient(t, gw.URL)
		c.header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":pw")))
		c.initialize("")
		return c
	}
	alice, bob := clientFor("alice"), clientFor("bob")
	tk := alice.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
	if m := bob.call("tasks/get", map[string]string{"taskId": tk.TaskID}); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("bob reads alice's task: %s", m.Result)
	}
	var list struct {
		Tasks []v2025Task `json:"tasks"`
	}
	alice.result("tasks/list", nil, &list)
	if len(list.Tasks) != 1 || list.Tasks[0].TaskID != tk.TaskID {
		t.Errorf("alice lists %+v", list.Tasks)
	}
	resp, err := http.Post(gw.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no credentials: HTTP %d, want basic_auth's 401", resp.StatusCode)
	}
}
