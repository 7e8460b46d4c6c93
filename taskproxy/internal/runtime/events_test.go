package runtime

import (
	"context"
	"slices"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Publish and Deliver wake the subscribers of the event's task only, by
// kind; Watched lists the tasks with subscribers, for relays that poll.
func TestHubEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		ev           task.TaskEvent
		wantChanged  bool
		wantProgress string
	}{
		{"changed", task.TaskEvent{TaskID: "a", Kind: task.EventChanged}, true, ""},
		{"progress", task.TaskEvent{TaskID: "a", Kind: task.EventProgress, Params: []byte(`{"progress":1}`)}, false, `{"progress":1}`},
		{"another task", task.TaskEvent{TaskID: "b", Kind: task.EventChanged}, false, ""},
		{"unknown kind counts as a change", task.TaskEvent{TaskID: "a", Kind: "input-answered"}, true, ""},
	}
	for _, tt := range tests {
		for _, deliver := range []bool{false, true} {
			h := NewHub()
			sub := h.Subscribe("a", "c")
			if deliver {
				h.Deliver(tt.ev)
			} else {
				h.Publish(context.Background(), tt.ev)
			}
			var changed bool
			select {
			case <-sub.Changed:
				changed = true
			default:
			}
			var progress string
			select {
			case p := <-sub.Progress:
				progress = string(p)
			default:
			}
			if changed != tt.wantChanged || progress != tt.wantProgress {
				t.Errorf("%s (deliver %v): changed %v, progress %q; want %v, %q", tt.name, deliver, changed, progress, tt.wantChanged, tt.wantProgress)
			}
			watched := h.Watched()
			slices.Sort(watched)
			if !slices.Equal(watched, []string{"a", "c"}) {
				t.Errorf("watched %v, want [a c]", watched)
			}
			sub.Close()
			if w := h.Watched(); len(w) != 0 || h.Relayed() {
				t.Errorf("after close: watched %v, Relayed %v", w, h.Relayed())
			}
		}
	}
}
