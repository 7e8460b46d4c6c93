package badgerstore

import (
	"context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
)

func benchStore(b *testing.B, dir string, sync bool) *Store {
	s, err := Open(Options{Dir: dir, InMemory: dir == "", SyncWrites: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchTask() *taskproxy.Task {
	t := testTask("anonymous", time.Now())
	t.Params = json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"x"}}`)
	return t
}

// processCPU is the CPU time (user and system) of this process so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStoreCreateConcurrent is durable creation by 64 concurrent
// writers, as a busy gateway does, with SyncWrites off and on: the group
// commit should make the two close. It reports the process's CPU time per
// create too, fsyncs included.
func BenchmarkStoreCreateConcurrent(b *testing.B) {
	for _, sync := range []bool{false, true} {
		name := "sync-off"
		if sync {
			name = "sync-on"
		}
		b.Run(name, func(b *testing.B) {
			s := benchStore(b, b.TempDir(), sync)
			b.SetParallelism(32)
			b.ReportAllocs()
			cpu := processCPU(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Create(context.Background(), benchTask()); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkStoreLifecycle is the store's share of a task's life as the
// gateway lives it: a durable create holding a lease, then the update that
// stores the result and ends it, by 32 concurrent workers on a store with
// SyncWrites. It reports the process's CPU per task, Badger's flushes,
// compactions and fsyncs included: the store's part of the lifecycle CPU
// row of ./xcaddy.sh bench.
func BenchmarkStoreLifecycle(b *testing.B) {
	s := benchStore(b, b.TempDir(), true)
	result := json.RawMessage(`{"content":[{"type":"text","text":"benchmark"}]}`)
	b.SetParallelism(16)
	b.ReportAllocs()
	cpu := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			t := benchTask()
			t.Params = json.RawMessage(`{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}`)
			t.Lease = taskproxy.Lease{Holder: s.Holder(), Expires: time.Now().Add(30 * time.Second)}
			if err := s.Create(ctx, t); err != nil {
				b.Fatal(err)
			}
			_, err := s.Update(ctx, t.Owner, t.ID, func(rec *taskproxy.Task) error {
				rec.Result = result
				return rec.SetStatus(taskproxy.StatusCompleted, "", time.Now())
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}
