package taskproxy

import (
	"context"
	"net"
	"net/http"
)

// Peer is what the glue knows about the network side of a request, beyond
// r.RemoteAddr: behind a trusted reverse proxy the client is not the peer
// that connected.
type Peer struct {
	// ClientIP is the client's address as the server determined it (from
	// forwarding headers when the connection came from a trusted proxy).
	ClientIP string
	// ViaTrustedProxy says the connection came from a proxy the server
	// was told to trust, so its Host header is the proxy's to vouch for.
	ViaTrustedProxy bool
}

type peerCtxKey struct{}

// WithPeer returns r carrying what the server knows of its client.
func WithPeer(r *http.Request, p Peer) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), peerCtxKey{}, p))
}

// peerOf returns the peer of r: the one the glue set, or else r.RemoteAddr.
func peerOf(r *http.Request) Peer {
	if p, ok := r.Context().Value(peerCtxKey{}).(Peer); ok && p.ClientIP != "" {
		return p
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return Peer{ClientIP: host}
}
