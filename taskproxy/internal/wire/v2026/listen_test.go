package v2026

import (
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A listen stream sends a task it has not sent and a new status at once,
// nothing for an unchanged task, and holds back a change that keeps the
// status (a new status message) until listenStatusInterval after the last
// notification of that task.
func TestListenPace(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	sent := listenedTask{sent: true, seen: t0, stat: task.StatusWorking, msg: "progress 1", at: t0}
	summary := func(status task.Status, msg string, updated time.Time) *task.Task {
		return &task.Task{Status: status, StatusMessage: msg, UpdatedAt: updated}
	}
	tests := []struct {
		name     string
		last     listenedTask
		sum      *task.Task
		now      time.Time
		send     bool
		holdTill time.Time
	}{
		{"never sent", listenedTask{}, summary(task.StatusWorking, "", t0), t0, true, time.Time{}},
		{"unchanged", sent, summary(task.StatusWorking, "progress 1", t0), t0.Add(time.Minute), false, time.Time{}},
		{"new status at once", sent, summary(task.StatusCompleted, "", t0.Add(time.Millisecond)), t0.Add(time.Millisecond), true, time.Time{}},
		{"new message held back", sent, summary(task.StatusWorking, "progress 2", t0.Add(100*time.Millisecond)), t0.Add(100 * time.Millisecond), false, t0.Add(listenStatusInterval)},
		{"new message after the interval", sent, summary(task.StatusWorking, "progress 2", t0.Add(time.Second)), t0.Add(listenStatusInterval), true, time.Time{}},
		{"same message, new time, held back", sent, summary(task.StatusWorking, "progress 1", t0.Add(time.Millisecond)), t0.Add(time.Millisecond), false, t0.Add(listenStatusInterval)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := tt.last
			send, hold := l.pace(tt.sum, tt.now)
			if send != tt.send || !hold.Equal(tt.holdTill) {
				t.Errorf("pace = %v, hold until %v; want %v, %v", send, hold, tt.send, tt.holdTill)
			}
		})
	}
}
