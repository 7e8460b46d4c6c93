package runtime

import (
	"context"
	"fmt"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// unwritableStore reads, but its filesystem (as Badger's disk guard would
// say) takes no writes.
type unwritableStore struct {
	task.Store
	err error
}

func (s unwritableStore) CheckWritable() error { return s.err }

// A store that reads but cannot take writes is not healthy: every new task
// would be refused there.
func TestHealthAsksWhetherTheStoreTakesWrites(t *testing.T) {
	t.Parallel()
	full := fmt.Errorf("%w: the store's filesystem is full", task.ErrUnavailable)
	for _, tt := range []struct {
		name     string
		err      error
		writable bool
	}{{"writable", nil, true}, {"full", full, false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt, route := testRouteOn(t, unwritableStore{Store: newMemStore(t), err: tt.err})
			if err := route.Start(); err != nil {
				t.Fatal(err)
			}
			h := waitRecovered(t, rt)
			if h.Writable != tt.writable || h.Healthy() != tt.writable || !h.Reachable {
				t.Errorf("health %+v, want writable and healthy %v, reachable", h, tt.writable)
			}
			if !tt.writable && h.Error != tt.err.Error() {
				t.Errorf("error %q, want %q", h.Error, tt.err)
			}
		})
	}
}

// A process that drains is not healthy: a load balancer that checks it
// sends new tasks elsewhere while the running ones finish.
func TestHealthWhileDraining(t *testing.T) {
	t.Parallel()
	rt, route := testRouteOn(t, newMemStore(t))
	if err := route.Start(); err != nil {
		t.Fatal(err)
	}
	h := waitRecovered(t, rt)
	if !h.Healthy() || h.Draining {
		t.Fatalf("health before the drain %+v, want healthy", h)
	}
	rt.Drain.Begin()
	if h = rt.Health(context.Background()); h.Healthy() || !h.Draining || !h.Reachable {
		t.Errorf("health while draining %+v, want draining and not healthy, the store still reachable", h)
	}
}

// waitRecovered waits for the recovery pass after the start, which ends
// at once on an empty store, and answers the health then.
func waitRecovered(t *testing.T, rt *Runtime) Health {
	t.Helper()
	var h Health
	waitFor(t, "the recovery pass", func() bool {
		h = rt.Health(context.Background())
		return h.Recovered
	})
	return h
}
