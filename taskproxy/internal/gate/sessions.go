package gate

import (
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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
//
// A forgotten binding leaves a mark, so that a check that read the store
// before the forget cannot put the binding back afterwards: a request in
// flight when the upstream lost the session would otherwise keep the ended
// session usable from the cache until its next refresh.
type SessionTable struct {
	bindings *lru.Cache[string, sessionBinding]

	mu      sync.Mutex // orders Remember against Forget
	forgets uint64     // Forget calls so far
}

// sessionBinding is one cached binding, or the mark of a forgotten one
// (forgottenAt, the table's forget count when it was forgotten).
type sessionBinding struct {
	owner       string
	refreshed   time.Time
	forgottenAt uint64
}

// NewSessionTable returns a table of at most size bindings (at least one).
func NewSessionTable(size int) *SessionTable {
	bindings, _ := lru.New[string, sessionBinding](max(size, 1)) // only a size below 1 fails
	return &SessionTable{bindings: bindings}
}

// Lookup returns the cached binding of id.
func (s *SessionTable) Lookup(id string) (owner string, refreshed time.Time, ok bool) {
	b, ok := s.bindings.Get(id)
	if !ok || b.forgottenAt != 0 {
		return "", time.Time{}, false
	}
	return b.owner, b.refreshed, true
}

// Forgets returns a mark to pass to Remember: take it before asking the
// store, so that a Forget that comes after is not undone.
func (s *SessionTable) Forgets() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forgets
}

// Remember caches a binding the store confirmed, unless the binding was
// forgotten after since (a Forgets mark taken before the store was asked).
func (s *SessionTable) Remember(id, owner string, refreshed time.Time, since uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.bindings.Peek(id); ok && b.forgottenAt > since {
		return
	}
	s.bindings.Add(id, sessionBinding{owner: owner, refreshed: refreshed})
}

// Forget drops the cached binding of id, and keeps Remember calls that
// began before from putting it back.
func (s *SessionTable) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgets++
	s.bindings.Add(id, sessionBinding{forgottenAt: s.forgets})
}

// SessionHeaderAlias reports whether h has a header that reads as
// Mcp-Session-Id once underscores are taken for hyphens (Mcp_Session_Id):
// servers behind CGI-style header mapping (WSGI, PHP, some proxies) read it
// as the session header, which the gateway would not have checked.
//
// The names are looked up, not searched for among h's: every request
// passes here, and a header map holds its names canonical (Go's HTTP/1, 2
// and 3 servers canonicalise every valid name they read, and Header's
// methods every name they set), as the session guard's own lookup of
// Mcp-Session-Id relies on too. A name that reads as the session header is
// a valid one, so its canonical form is one of sessionHeaderAliases.
func SessionHeaderAlias(h http.Header) bool {
	for _, name := range sessionHeaderAliases {
		if _, ok := h[name]; ok {
			return true
		}
	}
	return false
}

// sessionHeaderAliases are the canonical forms of the spellings of
// Mcp-Session-Id with an underscore for one hyphen or both.
var sessionHeaderAliases = [...]string{"Mcp_session_id", "Mcp-Session_id", "Mcp_session-Id"}
