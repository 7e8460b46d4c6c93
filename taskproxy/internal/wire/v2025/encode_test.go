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

// AppendTask writes what Render's Task encodes to, whatever the times:
// other zones, sub-millisecond parts, the zero time, years past 9999 or
// before year 1.
func TestV2025AppendTask(t *testing.T) {
	t.Parallel()
	paris := time.FixedZone("CET", 3600)
	base := task.Task{ID: "9sle5G8nJypWiKEpw-_TZA", Status: task.StatusWorking, CreatedAt: time.Unix(1_800_000_000, 123_456_789), UpdatedAt: time.Unix(1_800_000_001, 0).In(paris), TTL: time.Minute}
	tests := []struct {
		name string
		edit func(*task.Task)
	}{
		{"plain", func(*task.Task) {}},
		{"message and poll interval", func(tk *task.Task) {
			tk.StatusMessage = "a \"quote\", <b>&</b>, \u2028, \xff"
			tk.PollInterval = 1500 * time.Millisecond
		}},
		{"a failure on the other wire", func(tk *task.Task) { tk.Status, tk.IsError = task.StatusCompleted, true }},
		{"the zero time", func(tk *task.Task) { tk.CreatedAt, tk.UpdatedAt = time.Time{}, time.Time{} }},
		{"year 12345 and year -5", func(tk *task.Task) {
			tk.CreatedAt, tk.UpdatedAt = time.Date(12345, 1, 2, 3, 4, 5, 6e6, time.UTC), time.Date(-5, 1, 1, 0, 0, 0, 0, paris)
		}},
		{"an id to escape, no ttl", func(tk *task.Task) { tk.ID, tk.TTL = "a<b>\"c\"", 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk := base
			tt.edit(&tk)
			want, err := json.Marshal(Render(&tk))
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendTask([]byte("held"), &tk); string(got) != "held"+string(want) {
				t.Errorf("AppendTask = %s\nwant       held%s", got, want)
			}
		})
	}
}

// Encoding a task into a buffer with room allocates nothing: the times
// are not formatted into strings of their own.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestV2025AppendTaskAllocs(t *testing.T) {
	tk := &task.Task{ID: "9sle5G8nJypWiKEpw-_TZA", Status: task.StatusCompleted, CreatedAt: time.Now(), UpdatedAt: time.Now(), TTL: time.Hour}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(50, func() { buf = AppendTask(buf[:0], tk) }); n != 0 {
		t.Errorf("%.0f allocations, want none", n)
	}
}
