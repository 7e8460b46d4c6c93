package jsonrpc

import (
	"encoding/json"
	"fmt"
	"testing"
)

// An upstream call's id is the JSON string encoding/json makes of it,
// whatever the task id holds.
func TestUpstreamCallID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		taskID  string
		attempt int
	}{
		{"9sle5G8nJypWiKEpw-_TZA", 1}, {"9sle5G8nJypWiKEpw-_TZA", 12}, {"", 0}, {"x", -3},
		{"a<b>&c", 1}, {"quo\"te", 2}, {"é", 1}, {"sp ace", 1}, {"a:b", 1},
	} {
		want, _ := json.Marshal(fmt.Sprintf("%s%s:call:%d", GatewayIDPrefix, tc.taskID, tc.attempt))
		if got := UpstreamCallID(tc.taskID, tc.attempt); string(got) != string(want) {
			t.Errorf("UpstreamCallID(%q, %d) = %s, want %s", tc.taskID, tc.attempt, got, want)
		}
	}
}

// The id of a call of a task the gateway made is written in one
// allocation: every task makes one.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestUpstreamCallIDAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(50, func() { _ = UpstreamCallID("9sle5G8nJypWiKEpw-_TZA", 1) }); n > 1 {
		t.Errorf("%.0f allocations, want 1", n)
	}
}
