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

// StreamTable counts the open long-lived answers per owner.
type StreamTable struct {
	mu sync.Mutex
	n  map[string]int
}

func NewStreamTable() *StreamTable { return &StreamTable{n: map[string]int{}} }

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
