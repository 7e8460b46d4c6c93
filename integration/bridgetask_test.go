package integration

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A tool the upstream runs as its own task, called by a 2026-07-28 client
// through the version bridge: the official TypeScript everything server's
// simulate-research-query (taskSupport required, 2025-11-25 only). The
// gateway's task follows the upstream's one on the principal's upstream
// session; its clarification elicitation is answered with tasks/update.

// bridgeSessionOf returns the one upstream session the gateway's log shows
// it opened for the principal subject.
func bridgeSessionOf(t *testing.T, gw *gateway, subject string) string {
	t.Helper()
	re := regexp.MustCompile(`"owner":"[^"]*:` + regexp.QuoteMeta(subject) + `","upstream_session":"([^"]*)"`)
	found := re.FindAllStringSubmatch(gw.logs(), -1)
	if len(found) != 1 || found[0][1] == "" {
		t.Fatalf("%s's upstream sessions = %v, want one", subject, found)
	}
	return found[0][1]
}

// researchReport checks a completed bridged task's result: the upstream's
// report, with the 2026-07-28 fields, under no upstream task id.
func researchReport(t *testing.T, task map[string]string, want string) {
	t.Helper()
	if task["status"] != "completed" || !strings.Contains(task["result"], want) ||
		!strings.Contains(task["result"], `"resultType":"complete"`) || strings.Contains(task["result"], "related-task") {
		t.Errorf("task = %v, want completed with %q, resultType complete and no upstream related-task", task, want)
	}
}

// flat renders a task for researchReport.
func flat(task map[string]json.RawMessage) map[string]string {
	out := map[string]string{}
	for k, v := range task {
		out[k] = string(v)
	}
	out["status"] = strings.Trim(out["status"], `"`)
	return out
}

func TestBridgeUpstreamTask(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	gw := startGateway(t, gatewayOptions{
		Upstream:   strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp"),
		Directives: "task_after 300ms\n" + hmacAuth,
	})
	checkNoRace(t, gw)
	dora := hmacToken(t, "dora", "t1")
	tasks := newBridgeClient(t, gw.URL, dora, true)
	plain := newBridgeClient(t, gw.URL, dora, false)

	t.Run("simulate-research-query without the tasks extension is refused", func(t *testing.T) {
		m, _, status := plain.on(t).send("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "tides"}})
		if m.Error == nil || m.Error.Code != -32021 {
			t.Errorf("plain call = HTTP %d %s / %+v, want -32021 (the tool runs only as a task)", status, m.Result, m.Error)
		}
	})

	t.Run("simulate-research-query as a task", func(t *testing.T) {
		tasks := tasks.on(t)
		res := tasks.ok("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "tides"}})
		if str(res["resultType"]) != "task" {
			t.Fatalf("call = %s, want a task", mustJSON(res))
		}
		id := str(res["taskId"])
		task := tasks.waitTask(id, "completed", "failed", "cancelled")
		researchReport(t, flat(task), "Research Report: tides")
		upID := adminUpstreamTaskID(t, gw, id)
		if upID == "" || upID == id {
			t.Fatalf("admin view upstream_task_id = %q, want the upstream's own id", upID)
		}
		if st := upstreamTaskStatus(t, upstreamURL, bridgeSessionOf(t, gw, "dora"), upID); st != "completed" {
			t.Errorf("the upstream's task %s is %q, want completed", upID, st)
		}
	})

	t.Run("simulate-research-query ambiguous answered with tasks/update", func(t *testing.T) {
		tasks := tasks.on(t)
		res := tasks.ok("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "python", "ambiguous": true}})
		if str(res["resultType"]) != "task" {
			t.Fatalf("call = %s, want a task", mustJSON(res))
		}
		id := str(res["taskId"])
		task := tasks.waitTask(id, "input_required", "completed", "failed", "cancelled")
		if str(task["status"]) != "input_required" {
			t.Fatalf("task = %s, want input_required", mustJSON(task))
		}
		key, method := onlyInput(t, task["inputRequests"])
		if method != "elicitation/create" || !strings.Contains(string(task["inputRequests"]), "python") ||
			strings.Contains(string(task["inputRequests"]), "related-task") {
			t.Errorf("inputRequests = %s, want the upstream's clarification without its related-task", task["inputRequests"])
		}
		up := tasks.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
			key: map[string]any{"action": "accept", "content": map[string]any{"interpretation": "snake"}}}})
		if str(up["resultType"]) != "complete" {
			t.Errorf("tasks/update = %s", mustJSON(up))
		}
		task = tasks.waitTask(id, "completed", "failed", "cancelled")
		researchReport(t, flat(task), "Clarification**: snake")
	})

	t.Run("cancel simulate-research-query", func(t *testing.T) {
		tasks := tasks.on(t)
		res := tasks.ok("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "python", "ambiguous": true}})
		if str(res["resultType"]) != "task" {
			t.Fatalf("call = %s, want a task", mustJSON(res))
		}
		id := str(res["taskId"])
		// Waiting for the clarification: the upstream's task is surely
		// created (and its id recorded) and still running.
		tasks.waitTask(id, "input_required")
		upID := adminUpstreamTaskID(t, gw, id)
		if ack := tasks.ok("tasks/cancel", map[string]any{"taskId": id}); str(ack["resultType"]) != "complete" {
			t.Errorf("tasks/cancel = %s", mustJSON(ack))
		}
		if task := tasks.waitTask(id, "cancelled", "completed", "failed"); str(task["status"]) != "cancelled" {
			t.Errorf("task = %s, want cancelled", mustJSON(task))
		}
		session := bridgeSessionOf(t, gw, "dora")
		waitFor(t, 30*time.Second, "the upstream's task cancelled", func() bool {
			return upstreamTaskStatus(t, upstreamURL, session, upID) == "cancelled"
		})
	})

	// Last: it opens a second upstream session for dora.
	t.Run("a session the upstream dropped fails one task with why, then is re-opened", func(t *testing.T) {
		tasks := tasks.on(t)
		req, _ := http.NewRequest(http.MethodDelete, upstreamURL, nil)
		req.Header.Set("Mcp-Session-Id", bridgeSessionOf(t, gw, "dora"))
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE of the upstream session: HTTP %d", resp.StatusCode)
		}
		res := tasks.ok("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "tides"}})
		task := tasks.waitTask(str(res["taskId"]), "completed", "failed", "cancelled")
		if str(task["status"]) != "failed" || !strings.Contains(string(task["error"]), "no longer knows the session") {
			t.Errorf("task on the dropped session = %s, want failed with why", mustJSON(task))
		}
		res = tasks.ok("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "tides"}})
		task = tasks.waitTask(str(res["taskId"]), "completed", "failed", "cancelled")
		researchReport(t, flat(task), "Research Report: tides")
	})
}

// TestBridgeUpstreamTaskRestart: the gateway dies while a bridged task the
// upstream runs waits for its clarification. The upstream's task and
// session live on in the upstream, and the record keeps both ids, so the
// restarted gateway follows the task again there: the client's tasks/update
// answer reaches the upstream and the task completes with its report.
func TestBridgeUpstreamTaskRestart(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	addr := strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")
	store := filepath.Join(t.TempDir(), "store")
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: "task_after 300ms"})
	c := newBridgeClient(t, gw.URL, "", true)
	res := c.ok("tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "python", "ambiguous": true}})
	if str(res["resultType"]) != "task" {
		t.Fatalf("call = %s, want a task", mustJSON(res))
	}
	id := str(res["taskId"])
	c.waitTask(id, "input_required")
	upID := adminUpstreamTaskID(t, gw, id)
	killGateway(t, gw)

	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: "task_after 300ms"})
	checkNoRace(t, gw2)
	c2 := newBridgeClient(t, gw2.URL, "", true)
	task := c2.waitTask(id, "input_required", "failed", "completed", "cancelled")
	if str(task["status"]) != "input_required" {
		t.Fatalf("after the restart task = %s, want input_required (the upstream still waits)", mustJSON(task))
	}
	if got := adminUpstreamTaskID(t, gw2, id); got != upID {
		t.Errorf("after the restart the record names upstream task %q, want %q", got, upID)
	}
	key, _ := onlyInput(t, task["inputRequests"])
	c2.ok("tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"interpretation": "comedy"}}}})
	task = c2.waitTask(id, "completed", "failed", "cancelled")
	researchReport(t, flat(task), "Clarification**: comedy")
}
