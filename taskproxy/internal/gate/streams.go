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

// StreamTable counts the open long-lived answers per owner, and the task
// ids their subscriptions watch.
type StreamTable struct {
	mu      sync.Mutex
	n       map[string]int
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

// Acquire takes a slot of key, or reports false when key holds the maximum.
func (s *StreamTable) Acquire(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key] >= MaxStreamsPerOwner {
		return false
	}
	s.n[key]++
	return true
}

func (s *StreamTable) Release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key]--; s.n[key] <= 0 {
		delete(s.n, key)
	}
}
