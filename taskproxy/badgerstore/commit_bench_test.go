package badgerstore

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/cputime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// processCPU is the CPU time of this process so far.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	used, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return used
}

func benchStore(b *testing.B, dir string, sync bool) *Store {
	b.Helper()
	s, err := Open(Options{Dir: dir, InMemory: dir == "", SyncWrites: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func benchTask() *task.Task {
	t := testTask("anonymous", time.Now())
	t.Params = json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"x"}}`)
	return t
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
// row of ./xcaddy.sh bench. The "gateway" case has the fields the gateway
// stores for a task of that row (about 550 and 650 bytes of record); the
// "plus-1KiB" case adds 1 KiB of arguments to each of the two writes, which
// shows how much of the store's CPU goes with the bytes written: Badger
// writes every byte to its memory-mapped log, its memtable, and its tables
// at each flush and compaction, each with page faults and msyncs. The
// "gateway-limits" case creates as the gateway does, within its default
// limits (task.DefaultMaxFinished finished tasks per owner: a check of
// that bound that walks every finished task of the owner per create shows).
func BenchmarkStoreLifecycle(b *testing.B) {
	for _, c := range []struct {
		name   string
		pad    int
		limits task.Limits
	}{
		{"gateway", 0, task.Limits{}},
		{"gateway-limits", 0, task.Limits{MaxFinished: task.DefaultMaxFinished}},
		{"plus-1KiB", 1 << 10, task.Limits{}},
	} {
		b.Run(c.name, func(b *testing.B) { benchStoreLifecycle(b, strings.Repeat("x", c.pad), c.limits) })
	}
}

func benchStoreLifecycle(b *testing.B, pad string, limits task.Limits) { //nolint:thelper // each case's benchmark body, not a helper: failures keep their own lines
	s := benchStore(b, b.TempDir(), true)
	result := json.RawMessage(`{"resultType":"complete","content":[{"type":"text","text":"done"}]}`)
	params := json.RawMessage(`{"name":"fast","arguments":{"a":"benchmark` + pad + `"}}`)
	var recordBytes atomic.Int64
	b.SetParallelism(16)
	b.ReportAllocs()
	cpu := processCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			t := benchTask()
			t.Principal, t.Era, t.Tool, t.Params = t.Owner, task.Era2025, "fast", params
			t.TTL, t.PollInterval = 10*time.Minute, time.Second
			t.UpstreamID = json.RawMessage(`"mcp-tasks:` + t.ID + `:call:1"`)
			t.Endpoint, t.Host, t.Route = "/mcp", "127.0.0.1:43655", "srv0#0"
			t.Headers = map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
			t.Lease = task.Lease{Holder: s.Holder(), Expires: time.Now().Add(30 * time.Second)}
			if err := s.CreateWithinLimits(ctx, t, limits); err != nil {
				b.Fatal(err)
			}
			done, err := s.Update(ctx, t.Owner, t.ID, func(rec *task.Task) error {
				rec.Result = result
				return rec.SetStatus(task.StatusCompleted, "", time.Now())
			})
			if err != nil {
				b.Fatal(err)
			}
			if data, err := task.EncodeRecord(done); err == nil {
				recordBytes.Store(int64(len(data)))
			}
		}
	})
	b.ReportMetric(float64(processCPU(b)-cpu)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(recordBytes.Load()), "record-B")
}
