package integration

import (
	"strings"
	"testing"
	"time"
)

// Badger's sync_writes and min_free apply when the store opens, and a
// reload keeps the open store (and the tasks running on it): a reload that
// changes them is told, in Caddy's log, that the settings in force stay
// until Caddy restarts, instead of being ignored without a word. A reload
// that keeps them says nothing, and a task running across both reloads is
// answered.
func TestReloadWarnsOfStoreSettingsKept(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	tk := c.createTask("slow_compute", map[string]any{"seconds": 2}, 60000)

	const warning = "stay in force until Caddy restarts"
	gw.reload(v2025Tools + "default_ttl 20m\nsync_writes on")
	if strings.Contains(gw.logs(), warning) {
		t.Errorf("a reload with the same store settings warned:\n%s", tail(gw.logs(), 4000))
	}
	gw.reload(v2025Tools + "sync_writes off")
	waitFor(t, 30*time.Second, "the warning that sync_writes off waits for a restart", func() bool {
		return strings.Contains(gw.logs(), warning)
	})
	for line := range strings.Lines(gw.logs()) {
		if strings.Contains(line, warning) &&
			(!strings.Contains(line, `"in_force":"sync_writes on, min_free 64MiB"`) || !strings.Contains(line, `"configured":"sync_writes off, min_free 64MiB"`)) {
			t.Errorf("the warning does not name the settings in force and those configured: %s", line)
		}
	}

	m := c.call("tasks/result", map[string]string{"taskId": tk.TaskID})
	if m.Error != nil || !strings.Contains(string(m.Result), "content") {
		t.Errorf("tasks/result of the task running across the reloads: %+v", m)
	}
}
