package task

import "context"

// SessionDescriber keeps, with a session's binding, what the session's
// client said of itself (the reverse version bridge's client description:
// its capabilities, client info and log level), so that every replica and
// the next process can serve the session, however many sessions there are.
// The description is opaque to the store; it lives and dies with its
// binding (a refresh extends both, ForgetSession and expiry end both).
// Implementations must be safe for concurrent use.
type SessionDescriber interface {
	// DescribeSession stores desc with the binding of sessionID to owner,
	// replacing what was stored with it; the binding keeps its ttl. It
	// returns ErrForeign when sessionID is bound to another owner and
	// ErrNotFound when it is not bound, as CheckSession does.
	DescribeSession(ctx context.Context, sessionID, owner string, desc []byte) error
	// SessionDescription returns the description stored with the binding
	// of sessionID to owner: nil, and no error, for a binding stored
	// without one (as by an older build). It returns ErrForeign and
	// ErrNotFound as CheckSession does.
	SessionDescription(ctx context.Context, sessionID, owner string) ([]byte, error)
}
