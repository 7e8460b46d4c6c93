package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// The polling helpers of the end-to-end tests, for state that has no
// notification (another process's store, a task's status behind HTTP).
// Each waits with a deadline and fails or answers when it passes; none
// hangs a test.

// waitFor polls cond every 20 ms until it holds, and fails the test when
// the timeout passes first.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTaskEnded polls tasks/get until task id ends or deadline passes, and
// returns its last status and message ("error" and the error's message
// when tasks/get fails).
func waitTaskEnded(mc *v2026Client, id string, deadline time.Time) (string, string) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), promptBound)
		m, _ := mc.request(ctx, "tasks/get", map[string]any{"taskId": id})
		cancel()
		status, message := "error", ""
		if m.Error != nil {
			message = m.Error.Message
		} else {
			var got struct {
				Status        string `json:"status"`
				StatusMessage string `json:"statusMessage"`
			}
			_ = json.Unmarshal(m.Result, &got)
			status, message = got.Status, got.StatusMessage
			if status != "working" && status != "input_required" {
				return status, message
			}
		}
		if time.Now().After(deadline) {
			return status, message
		}
		time.Sleep(200 * time.Millisecond)
	}
}
