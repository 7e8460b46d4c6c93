package runtime

import (
	"sync"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The audit log records at info level who first reads each state of a task
// (the first tasks/get or tasks/result that observes it, per owner); a
// client polling the same state again is recorded at debug level, so that
// polling once a second does not write a line a second per task.
//
// Which reads were recorded is held in memory, not on the task record: a
// write per first read would add a durable write to every task's life for
// the sake of a log line. The set is bounded by two generations of
// readGeneration entries: when the current generation fills, it becomes
// the previous one and the oldest is dropped. Memory stays under
// 2×readGeneration keys (about 200 bytes each), and a read forgotten so, or
// one after a restart, costs one more info line, never a missing one.

// readGeneration is how many first reads one generation holds.
const readGeneration = 16384

// readKey is one state of one task as seen by one owner.
type readKey struct {
	task, owner string
	status      task.Status
}

// readSet remembers the reads recorded at info level.
type readSet struct {
	mu        sync.Mutex
	cur, prev map[readKey]struct{}
}

// first records k and reports whether it is new.
func (s *readSet) first(k readKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return false
	}
	if _, ok := s.prev[k]; ok {
		return false
	}
	if s.cur == nil || len(s.cur) >= readGeneration {
		s.prev, s.cur = s.cur, make(map[readKey]struct{}, 64)
	}
	s.cur[k] = struct{}{}
	return true
}
