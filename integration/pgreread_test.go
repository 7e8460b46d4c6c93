package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// After pg_terminate_backend of every connection of the gateway (what an
// administrator or a failover does), the next reads answer as before: a
// read that failed because its connection was killed runs once more on a
// fresh connection before any error reaches the client. Each round reads
// right after the kill, when the pool still holds connections used a moment
// before, which it hands out without a ping.
func TestPostgresKilledConnectionsCostNoError(t *testing.T) {
	t.Parallel()
	dsn, db := testDatabase(t)
	dsn = withDSNParam(t, dsn, "application_name", "mcp-tasks-e2e")
	_, upAddr := testUpstream(t)
	gw := startPostgresGateway(t, upAddr, dsn, v2025Tools+hmacAuth+"task_after 300ms")
	gw.healthy("the PostgreSQL store to open")

	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	c.initialize("")
	finished := c.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "finished"}, 600000)
	if m := c.call("tasks/result", map[string]string{"taskId": finished.TaskID}); m.Error != nil {
		t.Fatalf("tasks/result: %+v", m.Error)
	}
	// A task still working is read from the database at every tasks/get,
	// never from a cache of finished tasks.
	working := c.createTask("slow_compute", map[string]any{"seconds": 600, "label": "working"}, 600000)
	t.Cleanup(func() { c.call("tasks/cancel", map[string]string{"taskId": working.TaskID}) })

	get := func(round int, id, want string) {
		t.Helper()
		m := c.call("tasks/get", map[string]string{"taskId": id})
		var got struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
		}
		if m.Error != nil {
			t.Fatalf("round %d: tasks/get of the %s task after pg_terminate_backend: error %d %q", round, want, m.Error.Code, m.Error.Message)
		}
		if err := json.Unmarshal(m.Result, &got); err != nil || got.TaskID != id || got.Status != want {
			t.Fatalf("round %d: tasks/get = %s (%v), want the task %s", round, m.Result, err, want)
		}
	}
	list := func(round int) {
		t.Helper()
		m := c.call("tasks/list", map[string]any{})
		if m.Error != nil {
			t.Fatalf("round %d: tasks/list after pg_terminate_backend: error %d %q", round, m.Error.Code, m.Error.Message)
		}
		if !strings.Contains(string(m.Result), finished.TaskID) || !strings.Contains(string(m.Result), working.TaskID) {
			t.Fatalf("round %d: tasks/list = %s, want both tasks", round, m.Result)
		}
	}
	ctx := context.Background()
	for round := range 5 {
		get(round, working.TaskID, "working") // a connection of the pool used just now
		pids := gatewayBackends(t, db)
		if len(pids) == 0 {
			t.Fatal("no connections of the gateway in pg_stat_activity")
		}
		if _, err := db.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = 'mcp-tasks-e2e'"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 30*time.Second, "the gateway's backends to end", func() bool {
			for _, p := range gatewayBackends(t, db) {
				if slices.Contains(pids, p) {
					return false
				}
			}
			return true
		})
		get(round, working.TaskID, "working")
		get(round, finished.TaskID, "completed")
		list(round)
	}
}
