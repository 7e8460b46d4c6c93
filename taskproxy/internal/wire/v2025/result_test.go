package v2025

import (
	"encoding/json"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

func TestResultResumeID(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			tk, id, ok := ParseResultResumeID(tt.in)
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
