package taskproxy

import (
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// WithPeer returns r carrying what the server knows of its client
// (task.WithPeer on its context): the rate limit, the stream slots and the
// rebinding guard then see the client behind a trusted proxy, not the proxy.
func WithPeer(r *http.Request, p task.Peer) *http.Request {
	return r.WithContext(task.WithPeer(r.Context(), p))
}
