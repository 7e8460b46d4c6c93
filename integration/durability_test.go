package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// killGateway ends the Caddy process with SIGKILL: no cleanup, no stopping
// event, as in a crash.
func killGateway(t *testing.T, gw *gateway) {
	t.Helper()
	if err := gw.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gw.proc.done:
	case <-time.After(10 * time.Second):
		t.Fatal("caddy did not die")
	}
}

// 100 tasks in both eras run when the gateway is killed; on restart every one
// is there: slow_compute ones failed with the restart reason, slow_echo ones
// (declared retry_on_restart) run again once and completed.
func TestSIGKILLRecovery(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	store := filepath.Join(t.TempDir(), "store")
	directives := v2025Tools + "task_after 200ms\ntool slow_echo optional retry_on_restart"
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: directives})

	v2025 := newRPCClient(t, gw.URL)
	v2025.initialize("")
	type created struct {
		id, era, tool string
	}
	var tasks []created
	var mu sync.Mutex
	for i := range 50 {
		tool, secs := "slow_compute", 120.0
		if i%2 == 1 {
			tool, secs = "slow_echo", 8.0
		}
		tk := v2025.createTask(tool, map[string]any{"seconds": secs, "label": fmt.Sprint("l", i)}, 600000)
		tasks = append(tasks, created{tk.TaskID, "legacy", tool})
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 10)
	for i := range 50 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			tool, secs := "slow_compute", 120.0
			if i%2 == 1 {
				tool, secs = "slow_echo", 8.0
			}
			mc := newV2026Client(t, gw.URL, true)
			res := mc.ok("tools/call", map[string]any{"name": tool, "arguments": map[string]any{"seconds": secs, "label": fmt.Sprint("m", i)}})
			if str(res["resultType"]) != "task" {
				t.Errorf("modern call %d answered %v", i, res)
				return
			}
			mu.Lock()
			tasks = append(tasks, created{str(res["taskId"]), "modern", tool})
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(tasks) != 100 {
		t.Fatalf("created %d tasks, want 100", len(tasks))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 50); err != nil {
		t.Fatal(err)
	}
	if err := up.WaitCalls(ctx, "slow_echo", 50); err != nil {
		t.Fatal(err)
	}
	killGateway(t, gw)

	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: directives})
	lc := newRPCClient(t, gw2.URL)
	lc.initialize("")
	mc := newV2026Client(t, gw2.URL, true)
	counts := map[string]int{}
	for _, tk := range tasks {
		var status, message string
		waitFor(t, 60*time.Second, "task "+tk.id+" to end", func() bool {
			if tk.era == "legacy" {
				got := lc.getTask(tk.id)
				status, message = got.Status, got.StatusMessage
			} else {
				got := mc.get(tk.id)
				status, message = str(got["status"]), str(got["statusMessage"])
				if status == "failed" {
					var e jsonrpc.Error
					if json.Unmarshal(got["error"], &e) != nil || e.Code != -32603 || !strings.Contains(e.Message, "gateway restarted") {
						t.Errorf("modern failed task lacks the -32603 restart error: %v", got)
					}
				}
			}
			return status != "working" && status != "input_required"
		})
		switch {
		case tk.tool == "slow_compute" && status == "failed" && message == "gateway restarted while the call was running; the upstream result is unknown":
			counts["failed with the restart reason"]++
		case tk.tool == "slow_echo" && status == "completed" && message == "": // as after one run; the upstream's calls count the re-runs
			counts["re-run and completed"]++
		default:
			t.Errorf("%s %s task %s ended %s %q", tk.era, tk.tool, tk.id, status, message)
		}
	}
	t.Logf("after SIGKILL: %d tasks, %v", len(tasks), counts)
	if counts["failed with the restart reason"] != 50 || counts["re-run and completed"] != 50 {
		t.Errorf("outcomes %v, want 50 and 50", counts)
	}
	if n := up.Calls("slow_echo"); n != 100 {
		t.Errorf("slow_echo ran %d times upstream, want 100 (50 before the kill, one re-run each)", n)
	}
}

// caddy reload while 20 tasks run: all 20 complete normally.
func TestReloadTwentyTasks(t *testing.T) {
	t.Parallel()
	c, gw, _ := v2025Setup(t, "")
	var ids []string
	for i := range 20 {
		ids = append(ids, c.createTask("slow_compute", map[string]any{"seconds": 2, "label": fmt.Sprint("r", i)}, 60000).TaskID)
	}
	gw.reload(v2025Tools + "default_ttl 20m")
	for _, id := range ids {
		m := c.call("tasks/result", map[string]string{"taskId": id})
		if m.Error != nil || c.getTask(id).Status != "completed" {
			t.Errorf("task %s after reload: %s / %v", id, m.Result, m.Error)
		}
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	t.Run("completed task is swept; its owner hears expired, others not found", func(t *testing.T) {
		gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth + "sweep_interval 200ms"})
		alice := newRPCClient(t, gw.URL)
		alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
		alice.initialize("")
		tk := alice.createTask("slow_compute", map[string]any{"seconds": 0.1}, 2000)
		alice.call("tasks/result", map[string]string{"taskId": tk.TaskID})
		waitFor(t, 10*time.Second, "the sweep", func() bool {
			m := alice.call("tasks/get", map[string]string{"taskId": tk.TaskID})
			return m.Error != nil
		})
		m := alice.call("tasks/get", map[string]string{"taskId": tk.TaskID})
		if m.Error.Code != -32602 || !strings.Contains(m.Error.Message, "expired") {
			t.Errorf("owner after the sweep: %+v", m.Error)
		}
		bob := newRPCClient(t, gw.URL)
		bob.header.Set("Authorization", "Bearer "+hmacToken(t, "bob", "t1"))
		bob.initialize("")
		foreign := bob.call("tasks/get", map[string]string{"taskId": tk.TaskID})
		unknown := bob.call("tasks/get", map[string]string{"taskId": task.NewTaskID()})
		if foreign.Error == nil || unknown.Error == nil || foreign.Error.Code != unknown.Error.Code || foreign.Error.Message != unknown.Error.Message {
			t.Errorf("non-owner: %+v, unknown id: %+v; want the same", foreign.Error, unknown.Error)
		}
	})
	t.Run("working task past its ttl fails and its call is cancelled", func(t *testing.T) {
		up, addr := testUpstream(t)
		gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
		c := newRPCClient(t, gw.URL)
		c.initialize("")
		tk := c.createTask("slow_compute", map[string]any{"seconds": 60}, 1500)
		m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
		if m.Error == nil || !strings.Contains(m.Error.Message, "expired") {
			t.Errorf("tasks/result = %s / %+v, want the expiry failure", m.Result, m.Error)
		}
		if got := c.getTask(tk.TaskID); got.Status != "failed" || got.StatusMessage != "task expired before completion" {
			t.Errorf("task = %+v", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
			t.Errorf("the upstream call was not cancelled at expiry: %v", err)
		}
	})
}

// Ten concurrent identical creates with one idempotency key: one task, one
// upstream call, in both eras; the key with other arguments is refused.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	v2025 := newRPCClient(t, gw.URL)
	v2025.initialize("")

	burst := func(send func(i int) string) map[string]bool {
		ids := map[string]bool{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 10 {
			wg.Go(func() {
				id := send(i)
				mu.Lock()
				ids[id] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		return ids
	}
	ids := burst(func(i int) string {
		body, _ := jsonrpc.RequestBytes(json.RawMessage(fmt.Sprint(500+i)), "tools/call", map[string]any{
			"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "once"}, "task": map[string]any{"ttl": 60000}})
		req := v2025.newRequest(context.Background(), body)
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer resp.Body.Close()
		var m jsonrpc.Message
		_ = json.NewDecoder(resp.Body).Decode(&m)
		var created struct{ Task v2025Task }
		_ = json.Unmarshal(m.Result, &created)
		return created.Task.TaskID
	})
	if len(ids) != 1 || ids[""] {
		t.Errorf("legacy burst gave tasks %v, want one", ids)
	}

	mids := burst(func(i int) string {
		v2026 := newV2026Client(t, gw.URL, true) // one each: clients count their ids
		v2026.header.Set("Idempotency-Key", "order-43")
		return str(v2026.ok("tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"seconds": 1, "label": "once"}})["taskId"])
	})
	if len(mids) != 1 || mids[""] {
		t.Errorf("modern burst gave tasks %v, want one", mids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = up.WaitCalls(ctx, "slow_compute", 1)
	_ = up.WaitCalls(ctx, "slow_echo", 1)
	if n := up.Calls("slow_compute"); n != 1 {
		t.Errorf("the legacy burst made %d upstream calls, want 1", n)
	}
	if n := up.Calls("slow_echo"); n != 1 {
		t.Errorf("the modern burst made %d upstream calls, want 1", n)
	}

	body, _ := jsonrpc.RequestBytes(json.RawMessage(`600`), "tools/call", map[string]any{
		"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "changed"}, "task": map[string]any{}})
	req := v2025.newRequest(context.Background(), body)
	req.Header.Set("Idempotency-Key", "order-42")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mismatch jsonrpc.Message
	_ = json.NewDecoder(resp.Body).Decode(&mismatch)
	if resp.StatusCode != http.StatusOK || mismatch.Error == nil || mismatch.Error.Code != -32602 || !strings.Contains(mismatch.Error.Message, "idempotency key reused with different arguments") {
		t.Errorf("reused key: %s / %+v", mismatch.Result, mismatch.Error)
	}
}

// caddy stop with tasks running in three stores: the workers of all the
// stores share one grace period (5 s) rather than waiting 5 s each, one
// store after the other (15 s here, past docker's 10 s before SIGKILL), and
// every task is recovered after the restart as the README says.
func TestStopGraceSharedByStores(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	dir := t.TempDir()
	config := func(admin, port string) string {
		site := ""
		for _, name := range []string{"a", "b", "c"} {
			site += "\thandle_path /" + name + "/* {\n\t\tmcp_tasks {\n\t\t\tstorage_dir " + filepath.Join(dir, name) +
				"\n\t\t}\n\t\treverse_proxy " + addr + "\n\t}\n"
		}
		return globalHead(admin, "") + "http://:" + port + " {\n\tbind 127.0.0.1\n" + site + "}\n"
	}
	gw := startCaddyfile(t, config)
	base := strings.TrimSuffix(gw.URL, "/mcp")
	tasks := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		c := newRPCClient(t, base+"/"+name+"/mcp")
		c.initialize("")
		tasks[name] = c.createTask("slow_compute", map[string]any{"seconds": 60}, 600000).TaskID
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 3); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, err := exec.Command(caddyBinary, "stop", "--address", gw.adminAddr).CombinedOutput(); err != nil {
		t.Fatalf("caddy stop: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "caddy to exit", gw.proc.Exited)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("caddy stop with three stores running tasks took %s, want about one grace period (5 s)", took.Round(100*time.Millisecond))
	}

	again := startCaddyfile(t, config)
	base = strings.TrimSuffix(again.URL, "/mcp")
	for name, id := range tasks {
		c := newRPCClient(t, base+"/"+name+"/mcp")
		c.initialize("")
		var got v2025Task
		waitFor(t, 30*time.Second, "the task of store "+name+" to be recovered", func() bool {
			got = c.getTask(id)
			return got.Status != "working"
		})
		if got.Status != "failed" || !strings.Contains(got.StatusMessage, "gateway restarted") {
			t.Errorf("task of store %s after the restart: %s %q", name, got.Status, got.StatusMessage)
		}
	}
}
