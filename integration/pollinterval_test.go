package integration

import (
	"encoding/json"
	"testing"
)

// TestReloadKeepsTaskPollInterval: pollInterval is a suggestion made per
// task and stored with it. A reload that changes poll_interval leaves the
// tasks created before it with the value they were created with, on both
// wires, and gives tasks created after it the new one, on the Badger store
// and on PostgreSQL.
func TestReloadKeepsTaskPollInterval(t *testing.T) {
	t.Parallel()
	const before, after = "poll_interval 700ms", "poll_interval 3s"
	directives := func(poll string) string { return v2025Tools + "task_after 200ms\n" + poll }
	tests := []struct {
		name string
		// start starts a gateway with the directives and returns it and
		// a function that reloads it with others.
		start func(t *testing.T, upAddr string) (*gateway, func(string))
	}{
		{"badger", func(t *testing.T, upAddr string) (*gateway, func(string)) {
			gw := startGateway(t, gatewayOptions{Upstream: upAddr, Directives: directives(before)})
			return gw, func(d string) { gw.reload(d) }
		}},
		{"postgres", func(t *testing.T, upAddr string) (*gateway, func(string)) {
			dsn, _ := testDatabase(t)
			gw := startPostgresGateway(t, upAddr, dsn, directives(before))
			gw.healthy("the store to open")
			return gw.gateway, func(d string) {
				gw.reload(d)
				gw.awaitNewServer()
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, upAddr := testUpstream(t)
			gw, reload := tt.start(t, upAddr)
			v2025 := newRPCClient(t, gw.URL)
			v2025.initialize("")
			v2026 := newV2026Client(t, gw.URL, true)
			create := func(label string) (string, string) {
				t.Helper()
				old := v2025.createTask("slow_compute", map[string]any{"seconds": 120, "label": label}, 600000).TaskID
				res := v2026.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 120, "label": label}})
				if str(res["resultType"]) != "task" {
					t.Fatalf("the 2026-07-28 call answered %v, want a task", res)
				}
				return old, str(res["taskId"])
			}
			// polls reads what tasks/get suggests for the task on each wire.
			polls := func(id2025, id2026 string) (int64, int64) {
				t.Helper()
				var ms int64
				_ = json.Unmarshal(v2026.get(id2026)["pollIntervalMs"], &ms)
				return v2025.getTask(id2025).PollInterval, ms
			}
			old2025, old2026 := create("before the reload")
			reload(directives(after))
			new2025, new2026 := create("after the reload")
			if a, b := polls(old2025, old2026); a != 700 || b != 700 {
				t.Errorf("tasks created before the reload suggest %d ms (2025-11-25) and %d ms (2026-07-28), want 700: the value they were created with", a, b)
			}
			if a, b := polls(new2025, new2026); a != 3000 || b != 3000 {
				t.Errorf("tasks created after the reload suggest %d ms (2025-11-25) and %d ms (2026-07-28), want 3000", a, b)
			}
			for _, id := range []string{old2025, new2025} {
				v2025.call("tasks/cancel", map[string]string{"taskId": id})
			}
			for _, id := range []string{old2026, new2026} {
				v2026.ok("tasks/cancel", map[string]any{"taskId": id})
			}
		})
	}
}
