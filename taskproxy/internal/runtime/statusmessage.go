package runtime

import (
	"sync"
	"time"
)

// An upstream's status message is its own text, stored with the task and
// shown to every client that polls, lists or listens: it is bounded as
// progress text is, and mirrored at most once per upstreamStatusInterval,
// since every write is a durable store write of the whole record. Nothing
// is lost by the pacing: the follow loops poll the upstream's task again,
// so a message passed over is taken by a later poll if it still stands.

// upstreamStatusInterval bounds how often an upstream's status message
// rewrites its task.
const upstreamStatusInterval = time.Second

// statusPace admits a status message that differs from the last one
// admitted, at most one per upstreamStatusInterval; the follow loop and the
// upstream's status notifications may offer at once.
type statusPace struct {
	mu      sync.Mutex
	at      time.Time
	message string
}

// admit reports whether message may be written now, and counts it if so.
func (p *statusPace) admit(message string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if message == p.message || !p.at.IsZero() && now.Sub(p.at) < upstreamStatusInterval {
		return false
	}
	p.at, p.message = now, message
	return true
}
