package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A 2025-11-25 session the upstream lost (it restarted): the task made in
// it fails saying so, the gateway ends the session too (its next request
// gets 404, so the client starts a new session, as the transport
// specifies, instead of making task after task that can only fail), and
// in a new session the failed task is still its owner's and calls work.
func TestUpstreamLostSession(t *testing.T) {
	t.Parallel()
	up := startUpstreamProcess(t)
	gw := startGateway(t, gatewayOptions{Upstream: up.addr, Directives: upstreamFaultDirectives})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	before := c.createTask("slow_echo", map[string]any{"seconds": 0.1, "label": "before"}, 600000)
	waitFor(t, 30*time.Second, "the first task to complete", func() bool { return c.getTask(before.TaskID).Status == "completed" })

	up.kill(t)
	up.start()
	lost := c.createTask("slow_echo", map[string]any{"seconds": 0.1, "label": "after"}, 600000)
	waitFor(t, 30*time.Second, "the task in the lost session to fail", func() bool {
		resp := c.post(context.Background(), []byte(`{"jsonrpc":"2.0","id":"poll","method":"tasks/get","params":{"taskId":"`+lost.TaskID+`"}}`))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound
	})

	// The session is ended for every request naming it.
	resp := c.post(context.Background(), []byte(`{"jsonrpc":"2.0","id":"ping","method":"ping"}`))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "Session not found") {
		t.Errorf("a request in the lost session = %d %s, want 404 Session not found", resp.StatusCode, body)
	}

	// A new session: the failed task says why; calls run again.
	c.session = ""
	c.initialize("")
	got := c.getTask(lost.TaskID)
	if got.Status != "failed" || !strings.Contains(got.StatusMessage, "no longer knows the session") {
		t.Errorf("the task of the lost session = %+v, want failed naming the session", got)
	}
	if m := c.call("tasks/result", map[string]string{"taskId": lost.TaskID}); m.Error == nil || !strings.Contains(m.Error.Message, "initialize a new session") {
		t.Errorf("tasks/result of the task of the lost session = %s %+v, want the error saying to start a new session", m.Result, m.Error)
	}
	again := c.createTask("slow_echo", map[string]any{"seconds": 0.1, "label": "again"}, 600000)
	if m := c.call("tasks/result", map[string]string{"taskId": again.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "again") {
		t.Errorf("a task in the new session: tasks/result = %s %+v", m.Result, m.Error)
	}
}
