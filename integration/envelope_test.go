package integration

import (
	"strings"
	"testing"
)

// The gateway must read each message the way the upstream will: a message
// it takes for "not JSON-RPC" passes through untouched, so whatever the
// upstream makes of it escapes the gateway's task methods and tool modes.
// Two spellings every upstream reads as an ordinary message: a version
// written with a JSON escape (any JSON reader), and a body that starts with
// a UTF-8 byte order mark (readers that decode the body as text first, as
// the TypeScript SDK does).
func TestEnvelopeSpellingsReachTheGateway(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	alice := hmacToken(t, "alice", "t1")
	a := newRPCClient(t, gw.URL)
	a.header.Set("Authorization", "Bearer "+alice)
	a.initialize("")
	task := a.createTask("slow_compute", map[string]any{"seconds": 30}, 60000)

	for _, spelling := range []struct {
		name   string
		prefix string
		ver    string
	}{
		{"escaped version", "", `"2\u002e0"`},
		{"byte order mark", "\xef\xbb\xbf", `"2.0"`},
	} {
		t.Run(spelling.name+": tasks/list is the gateway's", func(t *testing.T) {
			body := spelling.prefix + `{"jsonrpc":` + spelling.ver + `,"id":5,"method":"tasks/list"}`
			ans := postRaw(t, gw.URL, alice, a.session, nil, body)
			if ans.status != 200 || !strings.Contains(ans.body, task.TaskID) {
				t.Errorf("tasks/list: HTTP %d %s, want the gateway's list with %s", ans.status, ans.body, task.TaskID)
			}
		})
		t.Run(spelling.name+": a required tool still needs a task", func(t *testing.T) {
			body := spelling.prefix + `{"jsonrpc":` + spelling.ver + `,"id":6,"method":"tools/call","params":{"name":"failing_job","arguments":{}}}`
			ans := postRaw(t, gw.URL, alice, a.session, nil, body)
			if !strings.Contains(ans.body, `"code":-32601`) || !strings.Contains(ans.body, "requires task augmentation") {
				t.Errorf("a plain call of a required tool: HTTP %d %s, want the gateway's -32601", ans.status, ans.body)
			}
		})
	}
}
