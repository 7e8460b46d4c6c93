package taskproxy_test

import (
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
)

// The core's tests run on the real embedded store. This file is in the
// external test package so that importing badgerstore (which imports
// taskproxy) makes no cycle; the internal tests reach it through
// taskproxy.OpenTestStore.
func init() {
	taskproxy.OpenTestStore = func(tb testing.TB, dir string, syncWrites bool) taskproxy.Store {
		tb.Helper()
		s, err := badgerstore.Open(badgerstore.Options{Dir: dir, InMemory: dir == "", SyncWrites: syncWrites})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
}
