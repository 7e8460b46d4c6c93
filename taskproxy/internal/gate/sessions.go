package gate

import (
	"container/list"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

const (
	// MaxSessions bounds the cache of bindings. It holds only bindings the
	// store confirmed, so evicting one costs a store read, never a wrong
	// answer, and unknown ids never enter it.
	MaxSessions = 1 << 16
	// SessionIdleTTL is how long a binding lives without use.
	SessionIdleTTL = 24 * time.Hour
	// SessionRefresh is how often a session in use has its binding's ttl
	// extended: at most one store write per session per interval.
	SessionRefresh = 5 * time.Minute
)

// SessionTable caches confirmed bindings: session id to owner, with the
// time the stored binding's ttl was last extended. It is bounded; the least
// recently used entries go first.
type SessionTable struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*list.Element
	order *list.List // front: most recently used
}

type sessionEntry struct {
	id, owner string
	refreshed time.Time
}

func NewSessionTable(max int) *SessionTable {
	return &SessionTable{max: max, byID: map[string]*list.Element{}, order: list.New()}
}

// lookup returns the cached binding of id.
func (s *SessionTable) Lookup(id string) (owner string, refreshed time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if !ok {
		return "", time.Time{}, false
	}
	s.order.MoveToFront(e)
	entry := e.Value.(*sessionEntry)
	return entry.owner, entry.refreshed, true
}

// remember caches a binding the store confirmed.
func (s *SessionTable) Remember(id, owner string, refreshed time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.MoveToFront(e)
		*e.Value.(*sessionEntry) = sessionEntry{id: id, owner: owner, refreshed: refreshed}
		return
	}
	s.byID[id] = s.order.PushFront(&sessionEntry{id: id, owner: owner, refreshed: refreshed})
	if s.order.Len() > s.max {
		oldest := s.order.Back()
		s.order.Remove(oldest)
		delete(s.byID, oldest.Value.(*sessionEntry).id)
	}
}

func (s *SessionTable) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		s.order.Remove(e)
		delete(s.byID, id)
	}
}

// SessionHeaderAlias reports whether h has a header that reads as
// Mcp-Session-Id once underscores are taken for hyphens (Mcp_Session_Id):
// servers behind CGI-style header mapping (WSGI, PHP, some proxies) read it
// as the session header, which the gateway would not have checked.
func SessionHeaderAlias(h http.Header) bool {
	for k := range h {
		if len(k) == len(upstream.HeaderSessionID) && strings.IndexByte(k, '_') >= 0 && strings.EqualFold(strings.ReplaceAll(k, "_", "-"), upstream.HeaderSessionID) {
			return true
		}
	}
	return false
}
