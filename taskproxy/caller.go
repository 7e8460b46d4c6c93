package taskproxy

import (
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// WithCaller returns r carrying its caller (task.WithCaller on its
// context): the gateway binds the tasks and sessions r creates to c.Owner.
func WithCaller(r *http.Request, c task.Caller) *http.Request {
	return r.WithContext(task.WithCaller(r.Context(), c))
}
