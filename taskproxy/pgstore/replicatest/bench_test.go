package replicatest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// reportLatencies reports the median and 99th percentile of lat, in ms.
func reportLatencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	at := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// BenchmarkCrossReplicaCancel measures tasks/cancel on replica B until the
// upstream call of the 2026-07-28 task running on replica A has stopped
// (the upstream tool saw its context cancelled): B's guarded write, the
// notification, A's re-read and the closing of the upstream stream. The
// target is p99 <= 20 ms; it is reported, never asserted.
func BenchmarkCrossReplicaCancel(b *testing.B) {
	f := newFixture(b)
	a, r := f.replica(b, replicaOptions{}), f.replica(b, replicaOptions{})
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for i := range b.N {
		id := modernTask(b, a.url, upstream.ToolSlowCompute, map[string]any{"seconds": 600})
		if err := f.up.WaitCalls(ctx, upstream.ToolSlowCompute, i+1); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		ok(b, v2026Request(ctx, b, r.url, "tasks/cancel", map[string]any{"taskId": id}), "tasks/cancel on B")
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f.up.WaitCancellations(wait, upstream.ToolSlowCompute, i+1)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatencies(b, lat)
}

// BenchmarkRelayLatency measures one event published on replica B's hub
// until a subscriber on replica A has it (NOTIFY and LISTEN alone).
func BenchmarkRelayLatency(b *testing.B) {
	f := newFixture(b)
	a, r := f.replica(b, replicaOptions{}), f.replica(b, replicaOptions{})
	sub := a.rt.Hub.Subscribe("bench-task")
	defer sub.Close()
	lat := make([]time.Duration, 0, b.N)
	for range b.N {
		start := time.Now()
		r.rt.Hub.Publish(context.Background(), task.TaskEvent{TaskID: "bench-task", Kind: task.EventChanged})
		select {
		case <-sub.Changed:
		case <-time.After(30 * time.Second):
			b.Fatal("the event never arrived")
		}
		lat = append(lat, time.Since(start))
	}
	reportLatencies(b, lat)
}
