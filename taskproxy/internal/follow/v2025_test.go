package follow

import (
	"encoding/json"
	"testing"
)

// The one reader of a 2025-11-25 CreateTaskResult, for the worker that
// records the upstream's task and for the one that cancels a late one.
func TestReadV2025Created(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, result string
		ok           bool
		want         V2025Created
	}{
		{"created", `{"task":{"taskId":"t1","status":"working","statusMessage":"Analyzing","ttl":60000,"createdAt":"2026-01-01T00:00:00Z"}}`, true,
			V2025Created{TaskID: "t1", StatusMessage: "Analyzing"}},
		{"with _meta", `{"task":{"taskId":"t1","status":"working"},"_meta":{"io.modelcontextprotocol/model-immediate-response":"started"}}`, true,
			V2025Created{TaskID: "t1"}},
		{"tool result", `{"content":[{"type":"text","text":"done"}]}`, false, V2025Created{}},
		{"2026-07-28 shape", `{"resultType":"task","taskId":"t1","status":"working"}`, false, V2025Created{}},
		{"no id", `{"task":{"status":"working"}}`, false, V2025Created{}},
		{"task not an object", `{"task":"t1"}`, false, V2025Created{}},
		{"null task", `{"task":null}`, false, V2025Created{}},
		{"empty", ``, false, V2025Created{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got, ok := ReadV2025Created(json.RawMessage(tt.result)); ok != tt.ok || got != tt.want {
				t.Errorf("ReadV2025Created(%s) = %+v, %v; want %+v, %v", tt.result, got, ok, tt.want, tt.ok)
			}
		})
	}
}
