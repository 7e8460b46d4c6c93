package taskproxy

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// 2026-07-28 ignores params.task on tools/call (it is no opt-in there),
// while a 2025-11-25 server that runs tasks makes one for it: the version
// bridge strips it, so that a 2026-07-28 client's call never becomes an
// upstream task the gateway does not follow, and the client gets the
// tool's result (on the call, or as the result of the gateway's task).
func TestBridgeStripsClientTaskParam(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, caps string }{
		{"tasks extension declared", declaring},
		{"without the tasks extension", plainCaps},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := &bridgedTaskUpstream{fakeTaskUpstream: &fakeTaskUpstream{known: true, answered: make(chan struct{})}}
			g := testGateway(t, Config{})
			defer g.rt.Close(time.Second)
			g.bridge.Pin(true)
			w := httptest.NewRecorder()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plain","arguments":{},"task":{"ttl":60000},` + tt.caps + `}}`
			if err := g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "plain"), up); err != nil {
				t.Fatal(err)
			}
			got := w.Body.String()
			var created struct {
				Result struct{ ResultType, TaskID string } `json:"result"`
			}
			if json.Unmarshal(w.Body.Bytes(), &created) == nil && created.Result.ResultType == "task" {
				// The gateway's own task (the call outlasted task_after on
				// a busy machine): its result is the tool's, and its call
				// reaches the upstream in the background.
				got = string(waitEnded(t, g, task.Anonymous, created.Result.TaskID).Result)
			}
			if !up.saw("tools/call") {
				t.Fatalf("the call did not reach the upstream; answered HTTP %d %s", w.Code, w.Body)
			}
			up.mu.Lock()
			param := up.taskParam
			up.mu.Unlock()
			if param != nil {
				t.Errorf("the upstream got params.task %s", param)
			}
			if !strings.Contains(got, "ran plainly") {
				t.Errorf("call answered HTTP %d %s (%s), want the tool's result", w.Code, w.Body, got)
			}
		})
	}
}
