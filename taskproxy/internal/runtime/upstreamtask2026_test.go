package runtime

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestReadV2026Created(t *testing.T) {
	tests := []struct {
		name, result string
		ok           bool
		want         V2026Created
	}{
		{"created", `{"resultType":"task","taskId":"t1","status":"working","statusMessage":"step 1 of 3","pollIntervalMs":20}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, StatusMessage: "step 1 of 3", PollIntervalMs: 20}},
		{"tool result", `{"resultType":"complete","content":[]}`, false, V2026Created{}},
		{"2025-11-25 shape", `{"task":{"taskId":"t1","status":"working"}}`, false, V2026Created{}},
		{"no id", `{"resultType":"task","status":"working"}`, false, V2026Created{}},
		{"input required", `{"resultType":"input_required","inputRequests":{}}`, false, V2026Created{}},
		{"empty", ``, false, V2026Created{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ReadV2026Created(json.RawMessage(tt.result))
			if ok != tt.ok || got != tt.want {
				t.Errorf("ReadV2026Created(%s) = %+v, %v; want %+v, %v", tt.result, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestClampV2026Poll(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{0, minV2026Poll},
		{time.Millisecond, minV2026Poll},
		{time.Second, time.Second},
		{time.Hour, maxV2026Poll},
	}
	for _, tt := range tests {
		if got := clampV2026Poll(tt.in); got != tt.want {
			t.Errorf("clampV2026Poll(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestV2026ClientCapabilities(t *testing.T) {
	tests := []struct{ name, params, want string }{
		{"the call's", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
			`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"none recorded", `{"name":"x"}`, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"not an object", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":7}}`, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(v2026ClientCapabilities(json.RawMessage(tt.params))); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A 2025-11-25 task following a 2026-07-28 upstream's (the reverse
// bridge's) records the result in 2025-11-25 form; a 2026-07-28 task keeps
// the upstream's.
func TestV2026ResultFor(t *testing.T) {
	result := json.RawMessage(`{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`)
	tests := []struct {
		era  task.Era
		want string
	}{
		{task.Era2025, `{"content":[]}`},
		{task.Era2026, string(result)},
	}
	for _, tt := range tests {
		if got := v2026ResultFor(&task.Task{Era: tt.era}, result); string(got) != tt.want {
			t.Errorf("era %s: %s, want %s", tt.era, got, tt.want)
		}
	}
}
