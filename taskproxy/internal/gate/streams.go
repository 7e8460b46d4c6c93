package gate

import (
	"sync"
)

// Long-lived answers (a blocking tasks/result, a subscriptions/listen
// stream) each hold a connection and a goroutine until the task ends or the
// client leaves. Each owner may hold only so many at once, so that one
// caller cannot pin the server's connections.

// MaxStreamsPerOwner caps the long-lived answers one owner holds open.
const MaxStreamsPerOwner = 16

// DefaultMaxWatchedPerOwner caps the task ids one owner's open
// subscriptions/listen streams watch together, unless configured. Each change of a watched task wakes its streams,
// which read the summaries of all the ids they watch: without a bound per
// owner, the bound per stream times MaxStreamsPerOwner would let one caller
// make every change cost thousands of reads. Twice the bound of one stream
// leaves room for a client reconnecting a full stream while the server
// has not yet seen the old one close.
const DefaultMaxWatchedPerOwner = 2000

// StreamKind says which long-lived answer a stream is, for metrics.
type StreamKind uint8

// The kinds of stream.
const (
	// StreamListen is a 2026-07-28 subscriptions/listen stream.
	StreamListen StreamKind = iota
	// StreamResult is a 2025-11-25 tasks/result answer waiting for the
	// task's outcome (resumed ones included).
	StreamResult
	// NumStreamKinds is how many kinds there are.
	NumStreamKinds
)

// String is the kind's metric label.
func (k StreamKind) String() string {
	switch k {
	case StreamListen:
		return "listen"
	case StreamResult:
		return "result"
	}
	return "unknown"
}

// StreamKindOf is the kind of stream that answers method.
func StreamKindOf(method string) StreamKind {
	if method == "subscriptions/listen" {
		return StreamListen
	}
	return StreamResult
}

// StreamTable counts the open long-lived answers per owner and in all by
// kind, and the task ids their subscriptions watch.
type StreamTable struct {
	mu      sync.Mutex
	n       map[string]int
	open    [NumStreamKinds]int
	watched map[string]int
}

func NewStreamTable() *StreamTable {
	return &StreamTable{n: map[string]int{}, watched: map[string]int{}}
}

// Watch adds n watched task ids to key, or reports false, adding none, when
// that would take key past limit; watching reports how many key watches
// then.
func (s *StreamTable) Watch(key string, n, limit int) (ok bool, watching int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[key]+n > limit {
		return false, s.watched[key]
	}
	s.watched[key] += n
	return true, s.watched[key]
}

// Unwatch takes back n task ids that Watch added to key.
func (s *StreamTable) Unwatch(key string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[key] -= n; s.watched[key] <= 0 {
		delete(s.watched, key)
	}
}

// Acquire takes a slot of key for a stream of kind, or reports false when
// key holds the maximum.
func (s *StreamTable) Acquire(key string, kind StreamKind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key] >= MaxStreamsPerOwner {
		return false
	}
	s.n[key]++
	s.open[kind]++
	return true
}

// Release gives back a slot that Acquire took for key and kind.
func (s *StreamTable) Release(key string, kind StreamKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key]--; s.n[key] <= 0 {
		delete(s.n, key)
	}
	s.open[kind]--
}

// Open reports how many streams of kind are open.
func (s *StreamTable) Open(kind StreamKind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open[kind]
}
