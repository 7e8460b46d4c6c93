package storetest_test

import (
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/storetest"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A backend runs the shared suite from a test of its own, opening a fresh
// store for each case and closing it when the case ends. Badger in memory
// stands for the backend here.
func ExampleRun() {
	// In the backend's package, as func TestStore(t *testing.T):
	testStore := func(t *testing.T) { //nolint:thelper // the backend's test itself, not a helper
		storetest.Run(t, func(t *testing.T) task.Store {
			t.Helper()
			s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		})
	}
	_ = testStore
}
