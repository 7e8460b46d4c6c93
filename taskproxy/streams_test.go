package taskproxy

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// task.Anonymous callers' long-lived answers are counted per client address as
// the glue determined it, as the rate limit counts them: behind a trusted
// proxy every connection comes from the proxy's address.
func TestStreamSlotsKeyIsClientIP(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	open := func(clientIP string) bool {
		r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"x"}}`)
		r.RemoteAddr = "10.0.0.1:4000" // the same front proxy for everybody
		r = WithPeer(r, task.Peer{ClientIP: clientIP, ViaTrustedProxy: true})
		c := g.exchange(httptest.NewRecorder(), r, nil, &jsonrpc.Message{ID: json.RawMessage("1")}, task.Caller{Owner: task.Anonymous})
		return c.OpenStream() != nil
	}
	for i := range gate.MaxStreamsPerOwner {
		if !open("198.51.100.1") {
			t.Fatalf("stream %d of one client refused", i+1)
		}
	}
	if open("198.51.100.1") {
		t.Error("one client opened more than its streams")
	}
	if !open("198.51.100.2") {
		t.Error("another client behind the same proxy shares the first one's streams")
	}
}
