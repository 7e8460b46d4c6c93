package task

import "context"

// Peer is what the glue knows about the network side of a request, beyond
// the connection's address: behind a trusted reverse proxy the client is
// not the peer that connected.
type Peer struct {
	// ClientIP is the client's address as the server determined it (from
	// forwarding headers when the connection came from a trusted proxy).
	ClientIP string
	// ViaTrustedProxy says the connection came from a proxy the server
	// was told to trust, so its Host header is the proxy's to vouch for.
	ViaTrustedProxy bool
}

type peerCtxKey struct{}

// WithPeer returns ctx carrying what the server knows of its client.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerCtxKey{}, p)
}

// PeerOf returns the peer ctx carries, and whether it carries one with a
// client address.
func PeerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerCtxKey{}).(Peer)
	return p, ok && p.ClientIP != ""
}
