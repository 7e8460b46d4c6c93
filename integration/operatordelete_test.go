package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// An operator deletes a finished task before its ttl ends, through the
// admin API and caddy mcp-tasks delete, on both stores: a principal held
// at max_finished_per_principal creates again at once, a task still
// working is refused with 409 (cancel it first), the owner's tasks/get of
// the deleted task answers "Task has expired" as after the sweep (even
// though the owner polled it, which caches the answer), another
// principal's "Task not found", and the audit log names the operator. A
// bulk delete takes a principal's finished tasks and leaves others'.
func TestAdminDeleteFinished(t *testing.T) {
	t.Parallel()
	const directives = v2025Tools + hmacAuth + "max_finished_per_principal 1\n"
	stores := []struct {
		name  string
		start func(t *testing.T, upstream string) *gateway
	}{
		{"badger", func(t *testing.T, upstream string) *gateway {
			return startGateway(t, gatewayOptions{Upstream: upstream, Directives: directives})
		}},
		{"postgres", func(t *testing.T, upstream string) *gateway {
			dsn, _ := testDatabase(t)
			return startPostgresGateway(t, upstream, dsn, directives).gateway
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			up, addr := testUpstream(t)
			gw := st.start(t, addr)
			admin := gw.adminAddr
			waitFor(t, 60*time.Second, "health", func() bool {
				code, _ := adminDo(t, admin, "GET", "/mcp_tasks/health", nil)
				return code == http.StatusOK
			})
			alice := newRPCClient(t, gw.URL)
			alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
			alice.initialize("")
			bob := newRPCClient(t, gw.URL)
			bob.header.Set("Authorization", "Bearer "+hmacToken(t, "bob", "t1"))
			bob.initialize("")

			bobs := bob.createTask("slow_compute", map[string]any{"seconds": 0.01}, 600000)
			waitStatus(t, bob, bobs.TaskID, "completed", 30*time.Second)
			slow := alice.createTask("slow_compute", map[string]any{"seconds": 60}, 600000)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := up.WaitCalls(ctx, "slow_compute", 2); err != nil {
				t.Fatal(err)
			}
			quick := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 600000)
			waitStatus(t, alice, quick.TaskID, "completed", 30*time.Second)
			alice.getTask(quick.TaskID) // the finished answer, now cached
			atBound := func() bool {
				m := alice.callTool("slow_compute", map[string]any{"seconds": 0.01}, map[string]any{"ttl": 600000})
				return m.Error != nil && m.Error.Code == -32000 && strings.Contains(m.Error.Message, "too many finished tasks kept (limit 1)")
			}
			if !atBound() {
				t.Fatal("alice's create with one finished task kept was not refused at max_finished_per_principal 1")
			}

			refusals := []struct {
				id, inError string
				code        int
			}{
				{slow.TaskID, "is working: cancel it before deleting it", http.StatusConflict},
				{"no-such-task", "not found", http.StatusNotFound},
			}
			for _, r := range refusals {
				code, body := adminDo(t, admin, "DELETE", "/mcp_tasks/tasks/"+r.id, nil)
				var apiErr struct{ Error string }
				_ = json.Unmarshal([]byte(body), &apiErr)
				if code != r.code || !strings.Contains(apiErr.Error, r.inError) {
					t.Errorf("DELETE %s = %d %s, want %d with %q", r.id, code, body, r.code, r.inError)
				}
			}
			if got := alice.getTask(slow.TaskID); got.Status != "working" {
				t.Errorf("the refused delete left the working task %+v", got)
			}

			out, errOut, ok := runCaddy(t, "mcp-tasks", "delete", quick.TaskID, "--address", admin)
			if !ok || strings.TrimSpace(out) != "task "+quick.TaskID+" deleted (it was completed)" {
				t.Fatalf("caddy mcp-tasks delete: ok=%v %q %s", ok, out, errOut)
			}
			for _, c := range []struct {
				who  *rpcClient
				want string
			}{{alice, "Task has expired"}, {bob, "Task not found"}} {
				m := c.who.call("tasks/get", map[string]any{"taskId": quick.TaskID})
				if m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, c.want) {
					t.Errorf("tasks/get of the deleted task: error %+v, result %s; want -32602 %q", m.Error, m.Result, c.want)
				}
			}
			if code, body := adminDo(t, admin, "GET", "/mcp_tasks/tasks/"+quick.TaskID, nil); code != http.StatusGone {
				t.Errorf("admin GET of the deleted task = %d %s, want 410", code, body)
			}
			out, errOut, ok = runCaddy(t, "mcp-tasks", "delete", quick.TaskID, "--address", admin)
			if ok || !strings.Contains(errOut, "410") {
				t.Errorf("second delete: ok=%v %s %s", ok, out, errOut)
			}
			noErrorLogged(t, gw, "410")

			again := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 600000)
			waitStatus(t, alice, again.TaskID, "completed", 30*time.Second)
			waitFor(t, 10*time.Second, "the operator's delete in the audit log", func() bool {
				for line := range strings.SplitSeq(gw.logs(), "\n") {
					if strings.Contains(line, `"msg":"task deleted by operator"`) && strings.Contains(line, quick.TaskID) &&
						strings.Contains(line, `"principal":"alice"`) && strings.Contains(line, `"operator":"admin API (127.0.0.1:`) {
						return true
					}
				}
				return false
			})
			if code, body := adminDo(t, admin, "POST", "/mcp_tasks/tasks/"+slow.TaskID+"/cancel", nil); code != http.StatusOK {
				t.Errorf("cancelling the slow task: %d %s", code, body)
			}

			// The bulk delete: a principal's finished tasks (the one created
			// again, and the slow one, now cancelled), not another's.
			for _, bad := range []string{"", "?status=working", "?tool=slow_compute"} {
				if code, body := adminDo(t, admin, "DELETE", "/mcp_tasks/tasks"+bad, nil); code != http.StatusBadRequest {
					t.Errorf("DELETE /mcp_tasks/tasks%s = %d %s, want 400", bad, code, body)
				}
			}
			var count struct{ Deleted int }
			if code, body := adminDo(t, admin, "DELETE", "/mcp_tasks/tasks?principal=alice", &count); code != http.StatusOK || count.Deleted != 2 {
				t.Errorf("DELETE /mcp_tasks/tasks?principal=alice = %d %s, want 2 deleted", code, body)
			}
			var page adminPage
			if adminDo(t, admin, "GET", "/mcp_tasks/tasks?principal=alice", &page); len(page.Tasks) != 0 {
				t.Errorf("alice's tasks after the bulk delete: %v", ids(page.Tasks))
			}
			if got := bob.getTask(bobs.TaskID); got.Status != "completed" {
				t.Errorf("bob's task after the bulk delete of alice's: %+v", got)
			}
		})
	}
}
