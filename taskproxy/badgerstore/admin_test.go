package badgerstore

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The store-wide listing pages through every owner's tasks newest first,
// filters by status, principal and tool, and refuses forged cursors;
// GetAny finds a task whatever its owner and tells expired from unknown.
//
//nolint:paralleltest,tparallel // the test sweeps the store its cases read
func TestBadgerListAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var all []*task.Task // creation order
	for i, spec := range []struct {
		owner, principal, tool string
		status                 task.Status
	}{
		{"o:alice", "alice", "slow", task.StatusWorking},
		{"o:bob", "bob", "slow", task.StatusCompleted},
		{"o:alice", "alice", "greet", task.StatusCompleted},
		{"o:carol", "carol", "slow", task.StatusWorking},
		{"o:bob", "bob", "greet", task.StatusCancelled},
		{"o:alice", "alice", "slow", task.StatusFailed},
	} {
		tk := testTask(spec.owner, base.Add(time.Duration(i)*time.Second))
		tk.Principal, tk.Tool, tk.Status = spec.principal, spec.tool, spec.status
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		all = append(all, tk)
	}
	ids := func(ts []*task.Task) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	pick := func(idx ...int) []string {
		var out []string
		for _, i := range idx {
			out = append(out, all[i].ID)
		}
		return out
	}

	tests := []struct {
		name   string
		filter task.TaskFilter
		want   []string
	}{
		{"everything, newest first", task.TaskFilter{}, ids(newest)},
		{"status", task.TaskFilter{Status: task.StatusWorking}, pick(3, 0)},
		{"principal", task.TaskFilter{Principal: "alice"}, pick(5, 2, 0)},
		{"tool and status", task.TaskFilter{Tool: "slow", Status: task.StatusCompleted}, pick(1)},
		{"no match", task.TaskFilter{Principal: "dave"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, limit := range []int{1, 2, 4, 100} {
				var got []string
				cursor := ""
				for pages := 0; ; pages++ {
					if pages > len(all)+1 {
						t.Fatalf("limit %d: no end of pages", limit)
					}
					page, next, err := s.ListAll(ctx, tt.filter, cursor, limit)
					if err != nil {
						t.Fatalf("limit %d: %v", limit, err)
					}
					if len(page) > limit {
						t.Fatalf("limit %d: page of %d", limit, len(page))
					}
					got = append(got, ids(page)...)
					if next == "" {
						break
					}
					cursor = next
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("limit %d: got %v, want %v", limit, got, tt.want)
				}
			}
		})
	}

	for _, bad := range []string{"x", "!!!", "MDAwMDAwMDAwMDAwMDAwMC8uLi8"} {
		if _, _, err := s.ListAll(ctx, task.TaskFilter{}, bad, 10); !errors.Is(err, task.ErrInvalidCursor) {
			t.Errorf("cursor %q: err = %v, want task.ErrInvalidCursor", bad, err)
		}
	}

	got, err := s.GetAny(ctx, all[3].ID)
	if err != nil || got.Owner != "o:carol" {
		t.Fatalf("GetAny = %+v, %v", got, err)
	}
	if _, err := s.GetAny(ctx, task.NewTaskID()); !errors.Is(err, task.ErrNotFound) || errors.Is(err, task.ErrExpired) {
		t.Errorf("GetAny of an unknown id: err = %v, want task.ErrNotFound", err)
	}
	if _, err := s.Sweep(ctx, base.Add(2*time.Hour), 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAny(ctx, all[3].ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("GetAny of a swept task: err = %v, want task.ErrExpired", err)
	}
	if page, _, err := s.ListAll(ctx, task.TaskFilter{}, "", 10); err != nil || len(page) != 0 {
		t.Errorf("ListAll after the sweep: %d tasks, %v", len(page), err)
	}
}
