package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Three gateway replicas (the real Caddy) on one PostgreSQL database behind
// a fourth Caddy balancing round robin, in front of the go-sdk upstream.
// Clients only ever talk to the balancer, so consecutive requests of one
// flow land on different replicas: every flow that passes against one node
// passes here. Then the replica running tasks is killed with SIGKILL: its
// tasks are taken over once their leases expire, re-run when their tool is
// retry_on_restart and failed with the reason otherwise, and none is lost.
func TestReplicas(t *testing.T) {
	t.Parallel()
	c := startReplicaCluster(t, 3)
	up := c.up
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	type flow struct {
		name string
		run  func(t *testing.T)
	}
	var aliceV2025 []string // alice's 2025-11-25 tasks, for her list
	flows := []flow{
		{"2025-11-25 session bound in the store, used on every replica", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			for range len(c.nodes) {
				var tools struct {
					Tools []json.RawMessage `json:"tools"`
				}
				alice.result("tools/list", nil, &tools)
				if len(tools.Tools) == 0 {
					t.Errorf("tools/list on the session: no tools")
				}
			}
		}},
		{"2025-11-25 create, poll, result from a waiter on another replica", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			before := up.Calls("slow_compute")
			tk := alice.createTask("slow_compute", map[string]any{"seconds": 1.5, "label": "rr-legacy"}, 600000)
			c.track(tk.TaskID, "alice")
			aliceV2025 = append(aliceV2025, tk.TaskID)
			if tk.Status != "working" {
				t.Fatalf("created task = %+v", tk)
			}
			if c.runningOn(tk.TaskID) < 0 {
				t.Errorf("no replica's admin API says it runs task %s", tk.TaskID)
			}
			if got := alice.getTask(tk.TaskID); got.Status != "working" && got.Status != "completed" {
				t.Errorf("tasks/get = %+v", got)
			}
			m := alice.call("tasks/result", map[string]string{"taskId": tk.TaskID})
			if m.Error != nil || !strings.Contains(string(m.Result), "rr-legacy") {
				t.Fatalf("tasks/result = %s %+v", m.Result, m.Error)
			}
			for range len(c.nodes) {
				if got := alice.getTask(tk.TaskID); got.Status != "completed" {
					t.Errorf("after the result, tasks/get = %+v", got)
				}
			}
			if n := up.Calls("slow_compute") - before; n != 1 {
				t.Errorf("upstream ran the call %d times, want 1", n)
			}
		}},
		{"2025-11-25 cancel on another replica reaches the upstream", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			calls, cancels := up.Calls("slow_compute"), up.Cancellations("slow_compute")
			tk := alice.createTask("slow_compute", map[string]any{"seconds": 60}, 600000)
			c.track(tk.TaskID, "alice")
			aliceV2025 = append(aliceV2025, tk.TaskID)
			if err := up.WaitCalls(ctx, "slow_compute", calls+1); err != nil {
				t.Fatal(err)
			}
			var cancelled v2025Task
			alice.result("tasks/cancel", map[string]string{"taskId": tk.TaskID}, &cancelled)
			if cancelled.Status != "cancelled" {
				t.Fatalf("tasks/cancel answered %+v", cancelled)
			}
			if err := up.WaitCancellations(ctx, "slow_compute", cancels+1); err != nil {
				t.Fatalf("the upstream never saw the cancellation: %v", err)
			}
			if got := alice.getTask(tk.TaskID); got.Status != "cancelled" {
				t.Errorf("tasks/get after cancel = %+v", got)
			}
		}},
		{"2025-11-25 input through tasks/result, answered on another replica", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			tk := alice.createTask("confirm_delete", map[string]any{"filename": "rr.txt"}, 600000)
			c.track(tk.TaskID, "alice")
			aliceV2025 = append(aliceV2025, tk.TaskID)
			waitFor(t, 15*time.Second, "input_required", func() bool { return alice.getTask(tk.TaskID).Status == "input_required" })
			body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r1"`), "tasks/result", map[string]string{"taskId": tk.TaskID})
			stream := alice.open(ctx, body)
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
					if !strings.Contains(string(m.Params), "rr.txt") {
						t.Errorf("elicitation %s", m.Params)
					}
					answer, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"confirm": true}})
					if code := alice.send(answer); code != http.StatusAccepted {
						t.Fatalf("answering the elicitation: HTTP %d", code)
					}
					answered++
				case m.IsResponse():
					final = m
				}
			}
			if answered != 1 || final.Error != nil || !strings.Contains(string(final.Result), "Deleted rr.txt") {
				t.Fatalf("answered %d, final result = %s / %+v", answered, final.Result, final.Error)
			}
			if got := alice.getTask(tk.TaskID); got.Status != "completed" {
				t.Errorf("tasks/get = %+v", got)
			}
		}},
		{"2025-11-25 input answered by a 2026-07-28 tasks/update on a replica without the worker", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			tk := alice.createTask("confirm_delete", map[string]any{"filename": "rr-mixed.txt"}, 600000)
			c.track(tk.TaskID, "alice")
			aliceV2025 = append(aliceV2025, tk.TaskID)
			i := c.runningOn(tk.TaskID)
			if i < 0 {
				t.Fatalf("no replica runs task %s", tk.TaskID)
			}
			// Straight to another replica, not through the balancer.
			other := newV2026Client(t, "http://"+c.nodes[(i+1)%len(c.nodes)].addr+"/mcp", true)
			other.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
			got := other.waitStatus(tk.TaskID, "input_required")
			var inputs map[string]json.RawMessage
			_ = json.Unmarshal(got["inputRequests"], &inputs)
			if len(inputs) != 1 {
				t.Fatalf("inputRequests = %s", got["inputRequests"])
			}
			answers := map[string]any{}
			for k := range inputs {
				answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
			}
			other.ok("tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": answers})
			if done := other.waitStatus(tk.TaskID, "completed"); !strings.Contains(string(done["result"]), "Deleted rr-mixed.txt") {
				t.Errorf("result = %s", done["result"])
			}
		}},
		{"2025-11-25 tasks/list", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			for range len(c.nodes) {
				var list struct {
					Tasks []v2025Task `json:"tasks"`
				}
				alice.result("tasks/list", nil, &list)
				var got []string
				for _, tk := range list.Tasks {
					got = append(got, tk.TaskID)
				}
				for _, id := range aliceV2025 {
					if !strings.Contains(strings.Join(got, ","), id) {
						t.Errorf("alice's list %v lacks %s", got, id)
					}
				}
			}
		}},
		{"2026-07-28 create and get", func(t *testing.T) {
			ann := c.v2026(t, "ann")
			res := ann.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1.5, "label": "rr-modern"}})
			if str(res["resultType"]) != "task" {
				t.Fatalf("tools/call = %v, want a task", res)
			}
			id := str(res["taskId"])
			c.track(id, "ann")
			if got := ann.get(id); str(got["taskId"]) != id {
				t.Errorf("tasks/get right after create = %v", got)
			}
			if done := ann.waitStatus(id, "completed"); !strings.Contains(string(done["result"]), "rr-modern") {
				t.Errorf("result = %s", done["result"])
			}
		}},
		{"2026-07-28 tasks/update answers confirm_delete", func(t *testing.T) {
			ann := c.v2026(t, "ann")
			id := str(ann.ok("tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "m.txt"}})["taskId"])
			c.track(id, "ann")
			tk := ann.waitStatus(id, "input_required")
			var inputs map[string]json.RawMessage
			_ = json.Unmarshal(tk["inputRequests"], &inputs)
			if len(inputs) != 1 {
				t.Fatalf("inputRequests = %s", tk["inputRequests"])
			}
			answers := map[string]any{}
			for k := range inputs {
				answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
			}
			ann.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": answers})
			if done := ann.waitStatus(id, "completed"); !strings.Contains(string(done["result"]), "Deleted m.txt") {
				t.Errorf("result = %s", done["result"])
			}
		}},
		{"2026-07-28 tasks/update answers multi_input in two parts", func(t *testing.T) {
			ann := c.v2026(t, "ann")
			id := str(ann.ok("tools/call", map[string]any{"name": "multi_input", "arguments": map[string]any{}})["taskId"])
			c.track(id, "ann")
			tk := ann.waitStatus(id, "input_required")
			var inputs map[string]json.RawMessage
			_ = json.Unmarshal(tk["inputRequests"], &inputs)
			if len(inputs) != 2 {
				t.Fatalf("want 2 input requests, got %s", tk["inputRequests"])
			}
			var keys []string
			for k := range inputs {
				keys = append(keys, k)
			}
			content := map[string]any{"name": "Ada", "color": "green"}
			ann.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{keys[0]: map[string]any{"action": "accept", "content": content}}})
			if got := ann.get(id); str(got["status"]) != "input_required" {
				t.Errorf("after a partial answer: %v", got)
			}
			ann.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{keys[1]: map[string]any{"action": "accept", "content": content}}})
			if done := ann.waitStatus(id, "completed"); !strings.Contains(string(done["result"]), "Ada") {
				t.Errorf("result = %s", done["result"])
			}
		}},
		{"2026-07-28 cancel on another replica reaches the upstream", func(t *testing.T) {
			ann := c.v2026(t, "ann")
			calls, cancels := up.Calls("slow_compute"), up.Cancellations("slow_compute")
			id := str(ann.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})["taskId"])
			c.track(id, "ann")
			if err := up.WaitCalls(ctx, "slow_compute", calls+1); err != nil {
				t.Fatal(err)
			}
			ann.ok("tasks/cancel", map[string]any{"taskId": id})
			if err := up.WaitCancellations(ctx, "slow_compute", cancels+1); err != nil {
				t.Fatalf("the upstream never saw the cancellation: %v", err)
			}
			if got := ann.get(id); str(got["status"]) != "cancelled" {
				t.Errorf("after cancel: %v", got)
			}
		}},
		{"2026-07-28 subscriptions/listen sees a change made on another replica", func(t *testing.T) {
			ann := c.v2026(t, "ann")
			id := str(ann.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 2, "label": "rr-listen"}})["taskId"])
			c.track(id, "ann")
			_, body := ann.body("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
			lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
			defer lcancel()
			req := ann.newRequest(lctx, body)
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "subscriptions/listen")
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			events := sse.NewReader(resp.Body)
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
				if m.Method == "notifications/tasks" && strings.Contains(ev.Data, `"completed"`) {
					if !strings.Contains(ev.Data, "rr-listen") {
						t.Errorf("terminal notification lacks the result: %s", ev.Data)
					}
					return
				}
			}
		}},
		{"2025-11-25 notifications/cancelled of a plain call, sent to another replica, reaches the upstream", func(t *testing.T) {
			alice := c.v2025(t, "alice")
			calls, cancels := up.Calls("slow_compute"), up.Cancellations("slow_compute")
			body, _ := jsonrpc.RequestBytes(json.RawMessage(`777`), "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
			pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
			defer pcancel()
			done := make(chan struct{})
			go func() { // the answer's head comes with its first message
				defer close(done)
				if resp, err := httpClient.Do(alice.newRequest(pctx, body)); err == nil {
					resp.Body.Close()
				}
			}()
			if err := up.WaitCalls(pctx, "slow_compute", calls+1); err != nil {
				t.Fatal(err)
			}
			alice.notify("notifications/cancelled", map[string]any{"requestId": 777, "reason": "rr"})
			if err := up.WaitCancellations(pctx, "slow_compute", cancels+1); err != nil {
				t.Errorf("the plain call was not cancelled upstream: %v", err)
			}
			pcancel()
			<-done
		}},
		{"isolation: bob never sees alice's tasks on any replica", func(t *testing.T) {
			alice, aliceM := c.v2025(t, "alice"), c.v2026(t, "alice")
			v2025Task := alice.createTask("confirm_delete", map[string]any{"filename": "secret.txt"}, 600000)
			c.track(v2025Task.TaskID, "alice")
			v2026Task := str(aliceM.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})["taskId"])
			c.track(v2026Task, "alice")
			bob := c.v2025(t, "bob")
			bobToken := hmacToken(t, "bob", "t1")
			send := func(method, id string, v2026 bool) rawAnswer {
				if v2026 {
					return postRaw(t, c.URL, bobToken, "", v2026Headers(method, id), v2026Body(9, method, map[string]any{"taskId": id}))
				}
				b, _ := jsonrpc.RequestBytes(json.RawMessage(`9`), method, map[string]string{"taskId": id})
				return postRaw(t, c.URL, bobToken, bob.session, nil, string(b))
			}
			for _, tk := range []string{v2025Task.TaskID, v2026Task} {
				unknown := task.NewTaskID()
				for _, m := range []struct {
					method string
					v2026  bool
				}{{"tasks/get", false}, {"tasks/result", false}, {"tasks/cancel", false}, {"tasks/get", true}, {"tasks/cancel", true}} {
					for range len(c.nodes) {
						foreign, never := send(m.method, tk, m.v2026), send(m.method, unknown, m.v2026)
						if foreign.status != never.status || strings.ReplaceAll(foreign.body, tk, unknown) != never.body {
							t.Errorf("%s (2026-07-28 %v): alice's task answers bob differently from an unknown id:\nforeign %d %s\nunknown %d %s",
								m.method, m.v2026, foreign.status, foreign.body, never.status, never.body)
						}
					}
				}
			}
			for range len(c.nodes) {
				list := postRaw(t, c.URL, bobToken, bob.session, nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`)
				if list.status != 200 || !strings.Contains(list.body, `"tasks":[]`) {
					t.Errorf("bob lists %d %s, want no tasks", list.status, list.body)
				}
				ans := postRaw(t, c.URL, bobToken, alice.session, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
				if ans.status != http.StatusNotFound {
					t.Errorf("bob on alice's session: HTTP %d %s, want 404", ans.status, ans.body)
				}
			}
			if got := alice.getTask(v2025Task.TaskID); got.Status != "input_required" {
				t.Errorf("alice's 2025-11-25 task disturbed: %+v", got)
			}
			if got := aliceM.get(v2026Task); str(got["status"]) != "working" {
				t.Errorf("alice's 2026-07-28 task disturbed: %v", got)
			}
			alice.result("tasks/cancel", map[string]string{"taskId": v2025Task.TaskID}, &v2025Task)
			aliceM.ok("tasks/cancel", map[string]any{"taskId": v2026Task})
		}},
		{"idempotency: one key on two replicas gives one task", func(t *testing.T) {
			ida := c.v2025(t, "ida")
			calls := up.Calls("slow_compute")
			create := func(id int) string {
				body, _ := jsonrpc.RequestBytes(json.RawMessage(fmt.Sprint(id)), "tools/call", map[string]any{
					"name": "slow_compute", "arguments": map[string]any{"seconds": 0.5, "label": "once"}, "task": map[string]any{"ttl": 600000}})
				req := ida.newRequest(ctx, body)
				req.Header.Set("Idempotency-Key", "rr-order-1")
				resp, err := httpClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var m jsonrpc.Message
				_ = json.NewDecoder(resp.Body).Decode(&m)
				var created struct{ Task v2025Task }
				_ = json.Unmarshal(m.Result, &created)
				return created.Task.TaskID
			}
			first, second := create(500), create(501)
			if first == "" || first != second {
				t.Errorf("the key sent twice gave tasks %q and %q, want one", first, second)
			}
			c.track(first, "ida")
			var mu sync.Mutex
			ids := map[string]bool{}
			var wg sync.WaitGroup
			for range 6 {
				wg.Go(func() {
					mc := c.v2026(t, "ida")
					mc.header.Set("Idempotency-Key", "rr-order-2")
					id := str(mc.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0.5, "label": "once"}})["taskId"])
					mu.Lock()
					ids[id] = true
					mu.Unlock()
				})
			}
			wg.Wait()
			if len(ids) != 1 || ids[""] {
				t.Errorf("six concurrent 2026-07-28 creates with one key gave tasks %v, want one", ids)
			}
			for id := range ids {
				c.track(id, "ida")
				waitTaskEnded(c.v2026(t, "ida"), id, time.Now().Add(30*time.Second))
			}
			waitTaskEnded(c.v2026(t, "ida"), first, time.Now().Add(30*time.Second))
			if n := up.Calls("slow_compute") - calls; n != 2 {
				t.Errorf("the two keys made %d upstream calls, want 2", n)
			}
		}},
		{"quota: 30 concurrent creates at max_active_per_principal 3, both eras", func(t *testing.T) {
			const calls, limit = 30, 3
			for _, v2026 := range []bool{false, true} {
				owner := fmt.Sprint("quinn-", v2026)
				var mu sync.Mutex
				var tasks []string
				refused := 0
				var wg sync.WaitGroup
				for range calls {
					wg.Go(func() {
						var id string
						var e *jsonrpc.Error
						if v2026 {
							m, _ := c.v2026(t, owner).request(ctx, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
							var res struct{ ResultType, TaskID string }
							if e = m.Error; e == nil && json.Unmarshal(m.Result, &res) == nil && res.ResultType == "task" {
								id = res.TaskID
							}
						} else {
							m := c.v2025(t, owner).callTool("slow_compute", map[string]any{"seconds": 60}, map[string]any{"ttl": 600000})
							var created struct{ Task v2025Task }
							if e = m.Error; e == nil && json.Unmarshal(m.Result, &created) == nil {
								id = created.Task.TaskID
							}
						}
						mu.Lock()
						defer mu.Unlock()
						switch {
						case id != "":
							tasks = append(tasks, id)
						case e != nil && e.Code == -32000 && strings.Contains(e.Message, fmt.Sprintf("too many active tasks (limit %d)", limit)):
							refused++
						default:
							t.Errorf("%s: neither a task nor the quota refusal: %+v", owner, e)
						}
					})
				}
				wg.Wait()
				for _, id := range tasks {
					c.track(id, owner)
				}
				if len(tasks) != limit || refused != calls-limit {
					t.Errorf("%s: %d tasks created, %d refused; want %d and %d", owner, len(tasks), refused, limit, calls-limit)
				}
				q := c.v2026(t, owner)
				for _, id := range tasks {
					q.ok("tasks/cancel", map[string]any{"taskId": id})
				}
			}
		}},
	}
	passed := 0
	for _, f := range flows {
		if t.Run(f.name, f.run) {
			passed++
		}
	}

	// Kill -9 a replica while it runs tasks of every kind. Five kinds, one
	// principal each (the quota is 3), three rounds: round robin puts
	// every kind on every replica (five requests a round).
	type kind struct {
		owner, tool string
		v2026       bool
		secs        float64
	}
	kindsOf := []kind{
		{"kim", "slow_echo", false, 8},    // retry_on_restart: re-run
		{"ken", "slow_compute", false, 0}, // not: fails with the reason
		{"kai", "slow_echo", true, 8},
		{"kat", "slow_compute", true, 0},
		{"kay", "confirm_delete", true, 0}, // waits for input: waits on
	}
	type placed struct {
		id   string
		kind kind
		node int
	}
	v2025Of := map[string]*rpcClient{}
	v2026Of := map[string]*v2026Client{}
	for _, k := range kindsOf {
		if k.v2026 {
			v2026Of[k.owner] = c.v2026(t, k.owner)
		} else {
			v2025Of[k.owner] = c.v2025(t, k.owner)
			v2026Of[k.owner] = c.v2026(t, k.owner)
		}
	}
	echoes, computes, confirms := up.Calls("slow_echo"), up.Calls("slow_compute"), up.Calls("confirm_delete")
	var tasks []placed
	for round := range 3 {
		for _, k := range kindsOf {
			args := map[string]any{"seconds": k.secs, "label": fmt.Sprint("kill-", round)}
			if k.secs == 0 {
				args["seconds"] = 600
			}
			if k.tool == "confirm_delete" {
				args = map[string]any{"filename": fmt.Sprint("kill-", round, ".txt")}
			}
			var id string
			if k.v2026 {
				res := v2026Of[k.owner].ok("tools/call", map[string]any{"name": k.tool, "arguments": args})
				if str(res["resultType"]) != "task" {
					t.Fatalf("%s for %s answered %v, want a task", k.tool, k.owner, res)
				}
				id = str(res["taskId"])
			} else {
				id = v2025Of[k.owner].createTask(k.tool, args, 600000).TaskID
			}
			c.track(id, k.owner)
			tasks = append(tasks, placed{id: id, kind: k})
		}
	}
	for tool, n := range map[string]int{"slow_echo": echoes + 6, "slow_compute": computes + 6, "confirm_delete": confirms + 3} {
		if err := up.WaitCalls(ctx, tool, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range tasks {
		if tk.kind.tool == "confirm_delete" {
			v2026Of[tk.kind.owner].waitStatus(tk.id, "input_required")
		}
	}
	onNode := map[int]int{}
	for i := range tasks {
		tasks[i].node = c.holderOf(tasks[i].id)
		onNode[tasks[i].node]++
	}
	if len(onNode) != len(c.nodes) || onNode[-1] > 0 {
		t.Errorf("tasks per replica %v: round robin should spread them over the %d replicas", onNode, len(c.nodes))
	}
	victim := tasks[0].node // it runs a retryable task, and by the rotation every other kind
	var onVictim []placed
	for _, tk := range tasks {
		if tk.node == victim {
			onVictim = append(onVictim, tk)
		}
	}
	c.kill(victim)
	killedAt := time.Now()

	// The live replicas' tasks end as usual: slow_echo completes,
	// slow_compute is cancelled, confirm_delete is answered.
	answer := func(mc *v2026Client, id string) {
		tk := mc.get(id)
		var inputs map[string]json.RawMessage
		_ = json.Unmarshal(tk["inputRequests"], &inputs)
		answers := map[string]any{}
		for k := range inputs {
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
		}
		mc.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": answers})
	}
	for _, tk := range tasks {
		switch {
		case tk.node == victim:
		case tk.kind.tool == "slow_compute":
			v2026Of[tk.kind.owner].ok("tasks/cancel", map[string]any{"taskId": tk.id})
		case tk.kind.tool == "confirm_delete":
			answer(v2026Of[tk.kind.owner], tk.id)
		}
	}
	// The killed replica's: taken over once their lease expired.
	takenOver := 0
	for _, tk := range onVictim {
		if tk.kind.tool != "confirm_delete" {
			continue
		}
		waitFor(t, 90*time.Second, "a live replica to take over the task waiting for input", func() bool {
			n := c.holderOf(tk.id)
			return n >= 0 && n != victim
		})
		if got := v2026Of[tk.kind.owner].get(tk.id); str(got["status"]) != "input_required" {
			t.Errorf("the task waiting for input, taken over: %v", got)
		}
		answer(v2026Of[tk.kind.owner], tk.id)
	}
	for _, tk := range tasks {
		status, message := waitTaskEnded(v2026Of[tk.kind.owner], tk.id, time.Now().Add(90*time.Second))
		ok := false
		switch {
		case tk.node != victim:
			ok = status == map[string]string{"slow_echo": "completed", "slow_compute": "cancelled", "confirm_delete": "completed"}[tk.kind.tool]
		case tk.kind.tool == "slow_echo":
			ok = status == "completed" && message == "" && rerunCompleted(t, c.nodes[(victim+1)%len(c.nodes)].adminAddr, tk.id, rerunAfterTakeover) == nil
		case tk.kind.tool == "slow_compute":
			ok = status == "failed" && strings.Contains(message, "replica running the call stopped")
		case tk.kind.tool == "confirm_delete":
			ok = status == "completed"
		}
		if !ok {
			t.Errorf("%s task %s of %s (on replica %d, killed %d) ended %s %q", tk.kind.tool, tk.id, tk.kind.owner, tk.node, victim, status, message)
		} else if tk.node == victim {
			takenOver++
		}
	}
	t.Logf("takeover: %d of the killed replica's %d tasks ended %s after the kill", takenOver, len(onVictim), time.Since(killedAt).Round(time.Second))
	count := func(tool string) int {
		n := 0
		for _, tk := range onVictim {
			if tk.kind.tool == tool {
				n++
			}
		}
		return n
	}
	if n := up.Calls("slow_echo") - echoes; n != 6+count("slow_echo") {
		t.Errorf("slow_echo ran %d times upstream, want %d (6, and once more for each of the killed replica's)", n, 6+count("slow_echo"))
	}
	if n := up.Calls("slow_compute") - computes; n != 6 {
		t.Errorf("slow_compute ran %d times upstream, want 6: a non-retryable call ran twice", n)
	}
	if n := up.Calls("confirm_delete") - confirms; n != 6 {
		t.Errorf("confirm_delete ran %d rounds upstream, want 6 (two for each task)", n)
	}
	logged := 0
	for i, g := range c.nodes {
		if i != victim {
			logged += strings.Count(g.logs(), "taking over a task whose replica stopped")
		}
	}
	if logged != len(onVictim) {
		t.Errorf("the live replicas logged %d takeovers, want %d (each of the killed replica's tasks once)", logged, len(onVictim))
	}

	// No task is lost: every task created is found, ended, by its owner.
	lost := 0
	clients := map[string]*v2026Client{}
	for id, owner := range c.created {
		if clients[owner] == nil {
			clients[owner] = c.v2026(t, owner)
		}
		if status, message := waitTaskEnded(clients[owner], id, time.Now().Add(30*time.Second)); status == "working" || status == "input_required" || status == "error" {
			lost++
			t.Errorf("task %s of %s: %s %q", id, owner, status, message)
		}
	}
	t.Logf("replicas: 3 gateways on one PostgreSQL behind round robin: flows passed %d/%d, tasks created %d, taken over %d, lost %d",
		passed, len(flows), len(c.created), takenOver, lost)
	if passed != len(flows) || lost != 0 || takenOver != len(onVictim) {
		t.Errorf("want every flow passed, every task of the killed replica taken over, none lost")
	}
}

// The README's Caddyfiles of a replica and of the balancer are valid for
// the built Caddy.
func TestReadmeReplicasValidates(t *testing.T) {
	t.Parallel()
	for _, marker := range []string{"# on each replica", "# on the balancer"} {
		config := filepath.Join(t.TempDir(), "Caddyfile")
		if err := os.WriteFile(config, []byte(readmeBlock(t, marker)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(caddyBinary, "validate", "--config", config, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "MCP_TASKS_DSN=postgres://gw:pw-readme@127.0.0.1:1/tasks?connect_timeout=1",
			"MCP_JWT_SECRET=readme-replicas-secret-of-32-bytes-or-more", "HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Valid configuration") {
			t.Errorf("caddy validate of the README's block %q: %v\n%s", marker, err, out)
		}
	}
}
