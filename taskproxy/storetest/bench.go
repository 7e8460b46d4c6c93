package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Bench measures a store's hot operations with concurrent callers (see
// -cpu and SetParallelism): durable creates within a quota, reads, updates
// and lease renewals. It asserts nothing about speed; it gives backends one
// yardstick.
func Bench(b *testing.B, s task.Store) {
	ctx := context.Background()
	b.Run("CreateWithin", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			owner := task.NewTaskID() // one owner per goroutine, as many clients are
			for pb.Next() {
				tk := newTask(owner, time.Now())
				tk.Lease = task.Lease{Holder: s.Holder(), Expires: time.Now().Add(time.Minute)}
				if err := s.CreateWithin(ctx, tk, 1<<30); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	ids := make([]string, 256)
	for i := range ids {
		tk := newTask("bench", time.Now())
		if err := s.Create(ctx, tk); err != nil {
			b.Fatal(err)
		}
		ids[i] = tk.ID
	}
	b.Run("Get", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := s.Get(ctx, "bench", ids[i%len(ids)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("Update", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			i := int(time.Now().UnixNano())
			for pb.Next() {
				if _, err := s.Update(ctx, "bench", ids[i%len(ids)], func(t *task.Task) error { t.NextInputKey++; return nil }); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
	b.Run("Acquire", func(b *testing.B) {
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			i := int(time.Now().UnixNano())
			for pb.Next() {
				if _, err := s.Acquire(ctx, "bench", ids[i%len(ids)], s.Holder(), time.Now(), time.Minute); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}) // A reverse-bridge session's description is read on each of its
	// requests.
	b.Run("SessionDescription", func(b *testing.B) {
		desc := []byte(`{"capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"bench","version":"1"}}`)
		for i := range 64 {
			sid := fmt.Sprintf("bench-session-%d", i)
			if err := s.BindSession(ctx, sid, "bench", time.Hour); err != nil {
				b.Fatal(err)
			}
			if err := s.DescribeSession(ctx, sid, "bench", desc); err != nil {
				b.Fatal(err)
			}
		}
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			i := int(time.Now().UnixNano())
			for pb.Next() {
				if _, err := s.SessionDescription(ctx, fmt.Sprintf("bench-session-%d", i%64), "bench"); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	})
}
