package taskproxy

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestResultResumeID(t *testing.T) {
	tests := []struct {
		name, in string
		tk       string
		id       string
		ok       bool
	}{
		{"number id", resultResumeID("T1", json.RawMessage(`7`)), "T1", `7`, true},
		{"string id", resultResumeID("T2", json.RawMessage(`"a:b"`)), "T2", `"a:b"`, true},
		{"input id", string(jsonrpc.InputID("T3", "k")), "", "", false},
		{"foreign", "42", "", "", false},
		{"bad id", jsonrpc.GatewayIDPrefix + "T:result:!!:x", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk, id, ok := parseResultResumeID(tt.in)
			if ok != tt.ok || tk != tt.tk || string(id) != tt.id {
				t.Errorf("parse(%q) = %q %s %v", tt.in, tk, id, ok)
			}
		})
	}
	// Two ids of one request differ: each is drawn at random.
	if first, second := resultResumeID("T", json.RawMessage(`1`)), resultResumeID("T", json.RawMessage(`1`)); first == second {
		t.Error("resume ids repeat")
	}
}

// task.Anonymous callers' long-lived answers are counted per client address as
// the glue determined it, as the rate limit counts them: behind a trusted
// proxy every connection comes from the proxy's address.
func TestStreamSlotsKeyIsClientIP(t *testing.T) {
	g := testGateway(t, Config{})
	open := func(clientIP string) bool {
		r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"x"}}`)
		r.RemoteAddr = "10.0.0.1:4000" // the same front proxy for everybody
		r = WithPeer(r, task.Peer{ClientIP: clientIP, ViaTrustedProxy: true})
		c := &call{g: g, w: httptest.NewRecorder(), r: r, msg: &jsonrpc.Message{ID: json.RawMessage("1")}, owner: task.Anonymous}
		return c.openStream() != nil
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
