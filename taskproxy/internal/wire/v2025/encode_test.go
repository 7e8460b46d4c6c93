package v2025

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The hand-written encoding of a 2025-11-25 task is byte for byte what
// encoding/json writes, escaping included, and so is the CreateTaskResult
// around it.
func TestV2025TaskAppendJSON(t *testing.T) {
	t.Parallel()
	base := Task{TaskID: "9sle5G8nJypWiKEpw-_TZA", Status: task.StatusWorking, CreatedAt: "2026-12-01T09:08:17.320Z", LastUpdatedAt: "2026-12-01T09:08:17.320Z", TTL: 600000}
	tests := []struct {
		name string
		edit func(*Task)
	}{
		{"plain", func(*Task) {}},
		{"message and poll interval", func(lt *Task) { lt.StatusMessage = "Gathering sources..."; lt.PollInterval = 500 }},
		{"message to escape", func(lt *Task) { lt.StatusMessage = "a \"quote\", <b>&</b>, a\\b, \n\t\u2028, é, \x7f, \xff" }},
		{"failed, no ttl", func(lt *Task) { lt.Status = task.StatusFailed; lt.TTL = 0 }},
		{"negative numbers", func(lt *Task) { lt.TTL = -1; lt.PollInterval = -5 }},
		{"empty strings", func(lt *Task) { lt.TaskID, lt.CreatedAt, lt.LastUpdatedAt = "", "", "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lt := base
			tt.edit(&lt)
			want, err := json.Marshal(lt)
			if err != nil {
				t.Fatal(err)
			}
			if got := lt.AppendJSON(nil); !bytes.Equal(got, want) {
				t.Errorf("appendJSON = %s\nwant         %s", got, want)
			}
		})
	}
	tk := &task.Task{ID: "abc<d>", Status: task.StatusCompleted, IsError: true, StatusMessage: "done & dusted", CreatedAt: time.Unix(1_800_000_000, 123e6), UpdatedAt: time.Unix(1_800_000_001, 0), TTL: time.Minute, PollInterval: time.Second}
	want, _ := json.Marshal(struct {
		Task Task `json:"task"`
	}{Render(tk)})
	if got := CreateResult(tk); !bytes.Equal(got, want) {
		t.Errorf("legacyCreated = %s\nwant           %s", got, want)
	}
}
