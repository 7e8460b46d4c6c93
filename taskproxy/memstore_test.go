package taskproxy

import (
	"testing"
	"time"
)

// newMemStore returns a real in-memory store (Badger, through
// openTestStore), closed when the test ends.
func newMemStore(t testing.TB) Store {
	t.Helper()
	return openTestStore(t, "", false)
}

func testTask(owner string, created time.Time) *Task {
	return &Task{ID: NewTaskID(), Owner: owner, Status: StatusWorking, CreatedAt: created, UpdatedAt: created, TTL: time.Hour, Tool: "t"}
}
