package taskproxy

import (
	"net"
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// WithPeer returns r carrying what the server knows of its client
// (task.WithPeer on its context): the rate limit, the stream slots and the
// rebinding guard then see the client behind a trusted proxy, not the proxy.
func WithPeer(r *http.Request, p task.Peer) *http.Request {
	return r.WithContext(task.WithPeer(r.Context(), p))
}

// peerOf returns the peer of r: the one the glue set, or else r.RemoteAddr.
func peerOf(r *http.Request) task.Peer {
	if p, ok := task.PeerOf(r.Context()); ok {
		return p
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return task.Peer{ClientIP: host}
}
