package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What the gateway learns of an upstream (its initialize answer's task
// capability, the modes its tools declare) does not depend on which
// process, replica or configuration generation saw the session's
// initialize: a session opened before a `caddy reload`, before a SIGKILL
// and restart, or on another replica, still finds the upstream's required
// tool required, and its task-augmented calls run as the upstream's own
// tasks. The upstream is the official TypeScript everything server, whose
// simulate-research-query runs only as a task.

// checkRequiredToolLearned checks, on c's session, that the gateway answers
// as a route that saw the session's initialize does, each rounds times (so
// that every replica behind a round-robin balancer answers): a
// task-augmented call of the upstream's required tool, made before any
// tools/list, becomes the upstream's own task and completes with its
// report; a plain call is refused by the gateway as 2025-11-25 has it; and
// tools/list shows the tool required.
func checkRequiredToolLearned(t *testing.T, c *rpcClient, rounds int) {
	t.Helper()
	for i := range rounds {
		created := c.createTask("simulate-research-query", map[string]any{"topic": "tides"}, 120000)
		waitStatus(t, c, created.TaskID, "completed", 90*time.Second)
		m := c.call("tasks/result", map[string]string{"taskId": created.TaskID})
		var result struct {
			Content []struct{ Text string } `json:"content"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &result) != nil || len(result.Content) == 0 ||
			!strings.Contains(result.Content[0].Text, "Research Report: tides") {
			t.Errorf("task-augmented call %d: tasks/result = %s / %+v, want the upstream's research report", i, m.Result, m.Error)
		}
	}
	for i := range rounds {
		m := c.callTool("simulate-research-query", map[string]any{"topic": "tides"}, nil)
		if m.Error == nil || m.Error.Code != -32601 || !strings.Contains(m.Error.Message, "send params.task") {
			t.Errorf("plain call %d = %s / %+v, want the gateway's -32601 asking for params.task", i, m.Result, m.Error)
		}
	}
	for i := range rounds {
		if mode := advertisedModes(c)["simulate-research-query"]; mode != "required" {
			t.Errorf("tools/list %d: simulate-research-query is %q, want required", i, mode)
		}
	}
}

func TestLearnedUpstreamAcrossReload(t *testing.T) {
	t.Parallel()
	gw, _ := tsEverythingGateway(t, "")
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)
	// A changed configuration: a new route generation, which saw no
	// initialize of this session.
	gw.reload("rate_limit 1000")
	checkRequiredToolLearned(t, c, 1)
}

func TestLearnedUpstreamAcrossRestart(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	gw, upstreamURL := tsEverythingGateway(t, store)
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{}}`)
	killGateway(t, gw)
	addr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store})
	c.url = gw2.URL
	checkRequiredToolLearned(t, c, 1)
}

func TestLearnedUpstreamAcrossReplicas(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	upAddr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	dsn, _ := testDatabase(t)
	cluster := &replicaCluster{t: t, created: map[string]string{}}
	cluster.start(2, upAddr, dsn, hmacAuth+"trust_domain learned-e2e\nrate_limit 1000\n")
	// The session is opened on one replica; round robin sends the
	// requests that follow to both.
	alice := cluster.v2025(t, "alice")
	checkRequiredToolLearned(t, alice, 2)
}
