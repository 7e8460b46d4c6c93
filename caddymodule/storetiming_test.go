package caddymodule

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/storetest"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The timed Badger store is the store the runtime gets: it passes the
// suite every backend passes, store-wide listing and deletion included.
func TestTimedBadgerSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) task.Store {
		t.Helper()
		s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		timed := timeStore(s, "badger")
		if _, ok := timed.(timedBadger); !ok {
			t.Fatalf("timeStore(badger) = %T, want timedBadger", timed)
		}
		return timed
	})
}

// optionalStoreInterfaces are the interfaces the runtime and the admin API
// look for on a store with a type assertion.
var optionalStoreInterfaces = []reflect.Type{
	reflect.TypeFor[task.AdminLister](),
	reflect.TypeFor[task.Backuper](),
	reflect.TypeFor[task.Deleter](),
	reflect.TypeFor[task.EventSource](),
	reflect.TypeFor[task.ExpiredLeaseLister](),
	reflect.TypeFor[task.Leader](),
	reflect.TypeFor[task.StatsReporter](),
	reflect.TypeFor[task.SummaryReader](),
	reflect.TypeFor[task.WriteChecker](),
	reflect.TypeFor[interface{ CollectGarbage() error }](),
}

// Wrapping a backend's store for timing hides none of the optional
// interfaces the backend implements.
func TestTimedStoresKeepOptionalInterfaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		backend, timed reflect.Type
	}{
		{reflect.TypeFor[*badgerstore.Store](), reflect.TypeFor[timedBadger]()},
		{reflect.TypeFor[*pgstore.Store](), reflect.TypeFor[timedPostgres]()},
	}
	for _, tt := range tests {
		t.Run(tt.backend.String(), func(t *testing.T) {
			t.Parallel()
			if !tt.timed.Implements(reflect.TypeFor[task.Store]()) {
				t.Fatalf("%s is no task.Store", tt.timed)
			}
			implemented := 0
			for _, iface := range optionalStoreInterfaces {
				if !tt.backend.Implements(iface) {
					continue
				}
				implemented++
				if !tt.timed.Implements(iface) {
					t.Errorf("%s implements %s, but %s does not", tt.backend, iface, tt.timed)
				}
			}
			if implemented < 4 {
				t.Errorf("%s implements only %d optional interfaces: the list is out of date", tt.backend, implemented)
			}
		})
	}
}

// A store call is observed in store_duration_seconds under its operation
// and backend, and in no other series.
func TestStoreCallObserved(t *testing.T) {
	t.Parallel()
	s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	backend := "badger-test-" + task.NewTaskID() // a label no other test, nor a repeat of this one (-count), uses
	timed := timeStore(s, backend)
	if _, err := timed.Get(context.Background(), "alice", task.NewTaskID()); err == nil {
		t.Fatal("Get of a task never created succeeded")
	}
	for op := range task.NumStoreOps {
		var m dto.Metric
		h := metrics.storeDuration.WithLabelValues(op.String(), backend).(prometheus.Metric)
		if err := h.Write(&m); err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if op == task.OpGet {
			want = 1
		}
		if got := m.GetHistogram().GetSampleCount(); got != want {
			t.Errorf("store_duration_seconds{operation=%q,backend=%q} counts %d calls, want %d", op, backend, got, want)
		}
	}
}

// The cost of timing a store call: compare
//
//	go test -run '^$' -bench BenchmarkStoreGet -benchmem ./caddymodule/
func BenchmarkStoreGet(b *testing.B) {
	s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	tk := &task.Task{ID: task.NewTaskID(), Owner: "alice", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Tool: "t"}
	if err := s.Create(context.Background(), tk); err != nil {
		b.Fatal(err)
	}
	for _, bb := range []struct {
		name  string
		store task.Store
	}{{"plain", s}, {"timed", timeStore(s, "badger-bench")}} {
		b.Run(bb.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.store.Get(ctx, "alice", tk.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The timing's own cost, without the store's: the pair of clock readings
// and the histogram's observation each call adds.
func BenchmarkStoreTimer(b *testing.B) {
	timer := newStoreTimer("badger-bench")
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		timer.StoreCall(task.OpGet, time.Since(start))
	}
}
