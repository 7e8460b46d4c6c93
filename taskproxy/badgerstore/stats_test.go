package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestBadgerStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tests := []struct {
		name                string
		create, finish      int
		wantTasks, wantLive int
	}{
		{"empty", 0, 0, 0, 0},
		{"three working", 3, 0, 3, 3},
		{"two more, one ended", 2, 1, 5, 4},
	}
	for _, tt := range tests {
		for range tt.create {
			if err := s.Create(ctx, testTask("alice", time.Now())); err != nil {
				t.Fatal(err)
			}
		}
		tasks, _, err := s.List(ctx, "alice", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for _, tk := range tasks {
			if done == tt.finish || tk.Status.Terminal() {
				continue
			}
			if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error {
				return t.SetStatus(task.StatusCompleted, "", time.Now())
			}); err != nil {
				t.Fatal(err)
			}
			done++
		}
		st, err := s.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Tasks != tt.wantTasks || st.Active != tt.wantLive {
			t.Errorf("%s: stats %+v, want %d tasks, %d active", tt.name, st, tt.wantTasks, tt.wantLive)
		}
		if st.Bytes <= 0 || st.Bytes > 64<<20 {
			t.Errorf("%s: size %d, want the few MiB on disk, not the preallocated length", tt.name, st.Bytes)
		}
	}
}
