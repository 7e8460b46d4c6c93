package pgstore_test

import (
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/storetest"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The PostgreSQL store passes the shared store suite, each case in a fresh
// schema.
func TestSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) task.Store {
		t.Helper()
		return open(t, newSchema(t))
	})
}
