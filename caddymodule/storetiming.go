package caddymodule

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The latency of each store call is observed in the store_duration_seconds
// histogram, by operation and backend. The store a backend opens is
// wrapped in a task.TimedStore; since the wrapper hides the backend's
// optional interfaces (store-wide listing, leadership, events, backup,
// ...), which the runtime finds with type assertions, each known backend
// gets a type that embeds both: the Store methods come from the wrapper
// (one level up), every other method from the backend.

// storeTimer observes store calls into the histogram's series of one
// backend, resolved once so that a call costs no label lookup and no
// allocation.
type storeTimer [task.NumStoreOps]prometheus.Observer

func (t *storeTimer) StoreCall(op task.StoreOp, took time.Duration) {
	t[op].Observe(took.Seconds())
}

// newStoreTimer resolves the histogram's series of backend; they exist,
// at zero, from then on.
func newStoreTimer(backend string) *storeTimer {
	initMetrics()
	var t storeTimer
	for op := range task.NumStoreOps {
		t[op] = metrics.storeDuration.WithLabelValues(op.String(), backend)
	}
	return &t
}

type (
	badgerExtras   struct{ *badgerstore.Store }
	postgresExtras struct{ *pgstore.Store }
	timedBadger    struct {
		*task.TimedStore
		badgerExtras
	}
	timedPostgres struct {
		*task.TimedStore
		postgresExtras
	}
)

// timeStore wraps a store that a backend opened so that its calls are
// timed. A store of a backend this package does not know is returned as
// it is: wrapping it would hide its optional interfaces.
func timeStore(s task.Store, backend string) task.Store {
	switch s := s.(type) {
	case *badgerstore.Store:
		return timedBadger{task.NewTimedStore(s, newStoreTimer(backend)), badgerExtras{s}}
	case *pgstore.Store:
		return timedPostgres{task.NewTimedStore(s, newStoreTimer(backend)), postgresExtras{s}}
	}
	return s
}
