package task

import (
	"encoding/json"
	"time"
)

// benchTask is a task like the benchmarks' own: a tool call with small
// arguments.
func benchTask() *Task {
	now := time.Now()
	t := &Task{ID: NewTaskID(), Owner: "anonymous", Status: StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Tool: "t"}
	t.Params = json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"x"}}`)
	return t
}
