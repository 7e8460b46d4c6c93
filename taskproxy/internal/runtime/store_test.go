package runtime

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// newMemStore returns a real in-memory store (Badger), closed when the
// test ends. The runtime knows no backend; its tests may, since the
// backends import only package task.
func newMemStore(t testing.TB) task.Store {
	t.Helper()
	s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// newDiskStore returns a real Badger store in a temporary directory: the
// in-memory one keeps no value log, so it refuses large records.
func newDiskStore(t testing.TB) task.Store {
	t.Helper()
	s, err := badgerstore.Open(badgerstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// testRoute returns a runtime on an in-memory store and a route on it,
// closed when the test ends.
func testRoute(t testing.TB) (*Runtime, *Route) {
	t.Helper()
	return testRouteOn(t, newMemStore(t))
}

// testRouteOn returns a runtime on store and a route on it, closed when the
// test ends.
func testRouteOn(t testing.TB, store task.Store) (*Runtime, *Route) {
	t.Helper()
	rt := New(store, nil, nil)
	t.Cleanup(func() { _ = rt.Close(time.Second) })
	route := rt.NewRoute(RouteConfig{Name: "a", Logger: zap.NewNop(), AuditLogger: zap.NewNop()})
	return rt, route
}

// waitFor polls cond until it holds; a condition that never comes fails
// the test after a deadline rather than hanging it.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		<-tick.C
	}
}
