package task_test

import (
	"fmt"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A record goes to a store as bytes and comes back as the same task.
func ExampleEncodeRecord() {
	created := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	t := &task.Task{ID: "t1", Owner: "alice", Status: task.StatusWorking, Tool: "echo",
		CreatedAt: created, UpdatedAt: created, TTL: time.Hour}
	data, err := task.EncodeRecord(t)
	if err != nil {
		fmt.Println(err)
		return
	}
	var back task.Task
	if err := task.DecodeRecord(data, &back); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.ID, back.Owner, back.Tool, back.Status, back.ExpiresAt().Format(time.RFC3339))
	// Output: t1 alice echo working 2026-07-28T13:00:00Z
}

// A task moves only along the status machine: a finished task stays
// finished.
func ExampleTask_SetStatus() {
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	t := &task.Task{ID: "t1", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now}
	fmt.Println(t.SetStatus(task.StatusInputRequired, "waiting for the user", now.Add(time.Second)))
	fmt.Println(t.SetStatus(task.StatusCompleted, "", now.Add(2*time.Second)))
	fmt.Println(t.Status, t.Status.Terminal())
	fmt.Println(t.SetStatus(task.StatusWorking, "", now.Add(3*time.Second)) != nil)
	// Output:
	// <nil>
	// <nil>
	// completed true
	// true
}

func ExampleCanTransition() {
	fmt.Println(task.CanTransition(task.StatusWorking, task.StatusCancelled))
	fmt.Println(task.CanTransition(task.StatusCompleted, task.StatusWorking))
	// Output:
	// true
	// false
}
