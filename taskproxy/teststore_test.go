package taskproxy

import (
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// openTestStore opens a real store for the core's tests: Badger, in memory
// when dir is empty, else on disk in dir, closed when the test ends. The
// core's own code knows no backend; its tests may, since the backends import
// only package task.
func openTestStore(tb testing.TB, dir string, syncWrites bool) task.Store {
	tb.Helper()
	s, err := badgerstore.Open(badgerstore.Options{Dir: dir, InMemory: dir == "", SyncWrites: syncWrites})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}
