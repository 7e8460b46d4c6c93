package taskproxy

import (
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// newMemStore returns a real in-memory store (Badger, through
// openTestStore), closed when the test ends.
func newMemStore(t testing.TB) task.Store {
	t.Helper()
	return openTestStore(t, "", false)
}

func testTask(owner string, created time.Time) *task.Task {
	return &task.Task{ID: task.NewTaskID(), Owner: owner, Status: task.StatusWorking, CreatedAt: created, UpdatedAt: created, TTL: time.Hour, Tool: "t"}
}
