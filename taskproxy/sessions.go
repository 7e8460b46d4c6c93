package taskproxy

import (
	"container/list"
	"net/http"
	"sync"
)

// sessionTable remembers which owner each 2025-11-25 session belongs to, so
// that a session id created under one principal cannot be used by another.
// It binds a session when its initialize answer names it, or when the
// gateway first sees it. It is bounded: the least recently used sessions are
// forgotten first, and an explicit DELETE forgets a session at once.
type sessionTable struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*list.Element
	order *list.List // front: most recently used
}

type sessionEntry struct{ id, owner string }

const maxSessions = 1 << 16

func newSessionTable(max int) *sessionTable {
	return &sessionTable{max: max, byID: map[string]*list.Element{}, order: list.New()}
}

// check binds id to owner if it is new, and reports whether owner may use it.
func (s *sessionTable) check(id, owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.MoveToFront(e)
		return e.Value.(*sessionEntry).owner == owner
	}
	s.byID[id] = s.order.PushFront(&sessionEntry{id: id, owner: owner})
	if s.order.Len() > s.max {
		oldest := s.order.Back()
		s.order.Remove(oldest)
		delete(s.byID, oldest.Value.(*sessionEntry).id)
	}
	return true
}

func (s *sessionTable) forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.Remove(e)
		delete(s.byID, id)
	}
}

// guardSession answers 404, as for an unknown session, when r names a
// session that belongs to another owner. It reports whether r may go on.
func (g *Gateway) guardSession(w http.ResponseWriter, r *http.Request, owner string) bool {
	sid := r.Header.Get(headerSessionID)
	if sid == "" || r.Header.Get(headerProtocolVersion) >= string(EraModern) {
		return true
	}
	if g.rt.sessions.check(sid, owner) {
		return true
	}
	g.audit(auditDenied, "", nil, CallerOf(r.Context()))
	writeJSONError(w, http.StatusNotFound, nil, Errorf(CodeSessionNotFound, "Session not found"))
	return false
}
