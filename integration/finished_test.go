package integration

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A principal's finished tasks are bounded, and
// neither tasks/list nor another principal's tasks/get reads the tasks'
// results. What Caddy allocates shows the latter: the stores decoded every
// record whole before, megabytes per task.

// aliceAndBob returns clients of two principals on a gateway with JWT
// authentication (tasks/list is offered) and extra directives.
func aliceAndBob(t *testing.T, directives string) (*gateway, *rpcClient, *rpcClient) {
	t.Helper()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth + "rate_limit 10000\n" + directives})
	var clients []*rpcClient
	for _, who := range []string{"alice", "bob"} {
		c := newRPCClient(t, gw.URL)
		c.header.Set("Authorization", "Bearer "+hmacToken(t, who, "t1"))
		c.initialize("")
		clients = append(clients, c)
	}
	return gw, clients[0], clients[1]
}

// bigTasks creates n finished tasks of c with results of size bytes.
func bigTasks(t *testing.T, c *rpcClient, n, size int) []string {
	t.Helper()
	var ids []string
	for range n {
		task := c.createTask("big_result", map[string]any{"bytes": size}, 600000)
		waitStatus(t, c, task.TaskID, "completed", 30*time.Second)
		ids = append(ids, task.TaskID)
	}
	return ids
}

// allocated returns the bytes Caddy's Go runtime has allocated so far.
func allocated(t *testing.T, gw *gateway) int64 {
	t.Helper()
	for line := range strings.SplitSeq(gw.metrics(), "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_alloc_bytes_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("go_memstats_alloc_bytes_total %q: %v", v, err)
			}
			return int64(f)
		}
	}
	t.Fatal("Caddy's metrics have no go_memstats_alloc_bytes_total")
	return 0
}

// At max_finished_per_principal finished tasks, the principal's next
// create is refused with -32000 and the limit; its finished tasks are kept
// (they answer), and other principals are not held back.
func TestFinishedTasksBounded(t *testing.T) {
	t.Parallel()
	_, alice, bob := aliceAndBob(t, "max_finished_per_principal 3")
	ids := bigTasks(t, alice, 3, 10)
	m := alice.callTool("big_result", map[string]any{"bytes": 10}, map[string]any{"ttl": 600000})
	if m.Error == nil || m.Error.Code != -32000 || !strings.Contains(m.Error.Message, "too many finished tasks kept (limit 3)") {
		t.Errorf("create at the bound: error %+v, result %s; want -32000 naming the limit", m.Error, m.Result)
	}
	for _, id := range ids {
		if task := alice.getTask(id); task.Status != "completed" {
			t.Errorf("finished task %s is %q, want it kept", id, task.Status)
		}
	}
	bobs := bob.createTask("big_result", map[string]any{"bytes": 10}, 600000)
	waitStatus(t, bob, bobs.TaskID, "completed", 30*time.Second)
}

// tasks/list over finished tasks with 1 MiB results, and another
// principal's tasks/get of them, allocate far less than the results: the
// stores read summaries, and check the owner before reading a record.
func TestListAndForeignGetReadNoResults(t *testing.T) {
	t.Parallel()
	const tasks, size = 16, 1 << 20
	gw, alice, bob := aliceAndBob(t, "")
	ids := bigTasks(t, alice, tasks, size)
	cases := []struct {
		name  string
		calls int
		call  func(i int)
	}{
		{"tasks/list", 4, func(int) {
			var page struct {
				Tasks []json.RawMessage `json:"tasks"`
			}
			alice.result("tasks/list", map[string]any{}, &page)
			if len(page.Tasks) != tasks {
				t.Fatalf("tasks/list: %d tasks, want %d", len(page.Tasks), tasks)
			}
		}},
		{"another principal's tasks/get", tasks, func(i int) {
			m := bob.call("tasks/get", map[string]string{"taskId": ids[i]})
			if m.Error == nil {
				t.Fatalf("bob read alice's task %s", ids[i])
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := allocated(t, gw)
			for i := range c.calls {
				c.call(i)
			}
			// Reading the records would decode at least calls x 1 MiB
			// (a listing: x16); reading summaries, a few KiB per task.
			got := allocated(t, gw) - before
			t.Logf("%d calls allocated %d KiB in Caddy", c.calls, got>>10)
			if got > 8<<20 {
				t.Errorf("%d calls allocated %d MiB in Caddy; the results were read", c.calls, got>>20)
			}
		})
	}
}
