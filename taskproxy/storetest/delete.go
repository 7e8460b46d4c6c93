package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// An operator's delete of a finished task (task.Deleter): the task goes
// with everything that counts or lists it, its owner hears "expired" as
// after the sweep, and a task still running is refused.
func testDeleteFinished(t *testing.T, s task.Store) {
	ctx := context.Background()
	d, ok := s.(task.Deleter)
	if !ok {
		t.Fatalf("%T does not implement task.Deleter", s)
	}
	limits := task.Limits{MaxActive: 10, MaxFinished: 1}
	done, working := newTask("alice", t0), newTask("alice", t0.Add(time.Millisecond))
	for _, tk := range []*task.Task{done, working} {
		if err := s.CreateWithinLimits(ctx, tk, limits); err != nil {
			t.Fatalf("create under the bounds: %v", err)
		}
	}
	if _, err := s.Update(ctx, "alice", done.ID, setStatus(task.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	mustGet(t, s, "alice", done.ID) // a backend may cache a finished record on a read
	if err := s.CreateWithinLimits(ctx, newTask("alice", t0.Add(time.Second)), limits); !isFinishedQuota(1)(err) {
		t.Fatalf("create at the finished bound: %v, want the finished quota", err)
	}

	got, err := d.DeleteFinished(ctx, working.ID)
	if !errors.Is(err, task.ErrNotFinished) || got == nil || got.ID != working.ID || got.Status != task.StatusWorking {
		t.Fatalf("DeleteFinished of a working task = %+v, %v; want it with ErrNotFinished", got, err)
	}
	mustGet(t, s, "alice", working.ID)
	if _, err := d.DeleteFinished(ctx, task.NewTaskID()); !isPlainNotFound(err) {
		t.Errorf("DeleteFinished of an unknown id: %v, want plain ErrNotFound", err)
	}

	got, err = d.DeleteFinished(ctx, done.ID)
	if err != nil || got == nil || got.ID != done.ID || got.Owner != "alice" || got.Status != task.StatusCompleted {
		t.Fatalf("DeleteFinished of a completed task = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, "alice", done.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("owner's Get of the deleted task: %v, want ErrExpired", err)
	}
	if _, err := s.Get(ctx, "bob", done.ID); !isPlainNotFound(err) {
		t.Errorf("another owner's Get of the deleted task: %v, want plain ErrNotFound", err)
	}
	if _, err := adminLister(t, s).GetAny(ctx, done.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("GetAny of the deleted task: %v, want ErrExpired", err)
	}
	if _, err := d.DeleteFinished(ctx, done.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("DeleteFinished again: %v, want ErrExpired", err)
	}
	page, _, err := s.List(ctx, "alice", "", 10)
	if err != nil || len(page) != 1 || page[0].ID != working.ID {
		t.Errorf("owner's List after the delete = %d tasks, %v; want only the working one", len(page), err)
	}
	if err := s.CreateWithinLimits(ctx, newTask("alice", t0.Add(2*time.Second)), limits); err != nil {
		t.Errorf("create after the delete freed the finished bound: %v", err)
	}
}
