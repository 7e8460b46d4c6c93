package v2025on2026

import (
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
)

// An initialize the bridge passes on is watched: when its upstream opens
// a 2025-11-25 session, that endpoint speaks 2025-11-25, and the
// initializes that follow within wire.ProbeTTL pass on without a probe.
// Without this, an upstream whose probe answer is not kept (it refuses
// the probe's credentials, or answers it 404, 405 or 5xx) would be probed
// by every initialize. What the watch learns is the reverse bridge's
// alone: the shared verdicts, which also decide whether 2026-07-28 clients
// are bridged, do not change (an upstream speaking both versions whose
// probe failed once must not be taken for a 2025-11-25-only one).

// passedInitializes keeps, per endpoint, when a passed-on initialize last
// opened a 2025-11-25 session there.
type passedInitializes struct {
	mu     sync.Mutex
	opened *lru.Cache[string, time.Time]
}

func newPassedInitializes() *passedInitializes {
	opened, _ := lru.New[string, time.Time](wire.MaxProbeVerdicts) // only a size below 1 fails
	return &passedInitializes{opened: opened}
}

// recent reports whether an initialize opened a 2025-11-25 session at
// endpoint within wire.ProbeTTL.
func (p *passedInitializes) recent(endpoint string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.opened.Get(endpoint)
	return ok && time.Since(at) < wire.ProbeTTL
}

// watch returns w, which notes endpoint when the answer written through
// it opens a session (a 2xx naming an Mcp-Session-Id).
func (p *passedInitializes) watch(w http.ResponseWriter, endpoint string) http.ResponseWriter {
	return &sessionWatcher{ResponseWriter: w, seen: func() {
		p.mu.Lock()
		p.opened.Add(endpoint, time.Now())
		p.mu.Unlock()
	}}
}

// sessionWatcher is the writer of a passed-on initialize's answer.
type sessionWatcher struct {
	http.ResponseWriter
	seen    func()
	decided bool
}

func (s *sessionWatcher) decide(code int) {
	if s.decided {
		return
	}
	s.decided = true
	if code >= 200 && code <= 299 && s.Header().Get(upstream.HeaderSessionID) != "" {
		s.seen()
	}
}

func (s *sessionWatcher) WriteHeader(code int) {
	s.decide(code)
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionWatcher) Write(b []byte) (int, error) {
	s.decide(http.StatusOK)
	return s.ResponseWriter.Write(b)
}

// Flush passes a flush on.
func (s *sessionWatcher) Flush() {
	s.decide(http.StatusOK)
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *sessionWatcher) Unwrap() http.ResponseWriter { return s.ResponseWriter }
