package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// BenchLookups measures what a lookup that answers "not found" costs: of
// another owner's task with a 3 MiB result, of one with a small result,
// and of an id that does not exist; and, for scale, the owner's own
// lookup and a listing of ten 3 MiB tasks. The three "not found" lookups
// should cost alike: their time must not tell whether the task exists, nor
// how big it is. It asserts nothing about speed.
func BenchLookups(b *testing.B, s task.Store) {
	ctx := context.Background()
	big := bigTask("alice", time.Now(), 3<<20/2, task.StatusCompleted) // arguments and result: 3 MiB
	small := bigTask("alice", time.Now(), 16, task.StatusCompleted)
	tasks := []*task.Task{big, small}
	for range 9 {
		tasks = append(tasks, bigTask("carol", time.Now(), 3<<20/2, task.StatusCompleted))
	}
	for _, tk := range tasks {
		if err := s.Create(ctx, tk); err != nil {
			b.Fatal(err)
		}
	}
	cases := []struct {
		name, owner, id string
		want            error
	}{
		{"ForeignBig", "bob", big.ID, task.ErrNotFound},
		{"ForeignSmall", "bob", small.ID, task.ErrNotFound},
		{"MadeUpID", "bob", task.NewTaskID(), task.ErrNotFound},
		{"OwnBig", "alice", big.ID, nil},
	}
	for _, c := range cases {
		b.Run("Get"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, c.owner, c.id); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
					b.Fatalf("Get: %v, want %v", err, c.want)
				}
			}
		})
	}
	b.Run("ListBig", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if page, _, err := s.List(ctx, "carol", "", 50); err != nil || len(page) != 9 {
				b.Fatalf("List: %d tasks, %v", len(page), err)
			}
		}
	})
}
