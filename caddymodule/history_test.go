package caddymodule

import (
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The admin API's history begins with the task's creation, with the status
// it was created with, read from the record (which keeps the changes only).
func TestViewHistoryStartsWithCreation(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	working := func() *task.Task {
		return &task.Task{ID: "t", Status: task.StatusWorking, CreatedAt: created, UpdatedAt: created}
	}
	changed := working()
	if err := changed.SetStatus(task.StatusInputRequired, "asks", created.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := changed.SetStatus(task.StatusCompleted, "", created.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	bornDone := &task.Task{ID: "t", Status: task.StatusCompleted, CreatedAt: created, UpdatedAt: created}
	longLived := working()
	for i := range 100 { // past the record's bound on its history
		to := task.StatusInputRequired
		if i%2 == 1 {
			to = task.StatusWorking
		}
		if err := longLived.SetStatus(to, "", created.Add(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		t       *task.Task
		wantLen int
		first   task.Status
	}{
		{"no change yet", working(), 1, task.StatusWorking},
		{"two changes", changed, 3, task.StatusWorking},
		{"created completed", bornDone, 1, task.StatusCompleted},
		{"trimmed history", longLived, 1 + len(longLived.History), task.StatusWorking},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := viewHistory(tt.t)
			if len(got) != tt.wantLen {
				t.Fatalf("%d entries, want %d: %+v", len(got), tt.wantLen, got)
			}
			if c := got[0]; c.From != "" || c.To != string(tt.first) || !c.At.Equal(created) {
				t.Errorf("first entry %+v, want the creation in %s at %s", c, tt.first, created)
			}
			for i, c := range tt.t.History {
				if g := got[i+1]; g.From != string(c.From) || g.To != string(c.To) || g.Message != c.Message || !g.At.Equal(c.At) {
					t.Errorf("entry %d = %+v, want the record's %+v", i+1, g, c)
				}
			}
		})
	}
}
