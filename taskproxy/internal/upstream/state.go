package upstream

import (
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// State is what one route knows of its upstream's health from the calls
// the gateway passes on or makes itself: whether the last of them reached
// it, when one last did, the last failure to reach it and when, and the
// protocol versions a probe found there. It is for operators (the admin
// health answer) and for the warning that names a wrong upstream address
// the first time a call cannot reach it; a store's health, not this,
// decides whether the gateway takes tasks.
type State struct {
	log *zap.Logger

	mu          sync.Mutex
	reachable   *bool // nil until a call ended either way
	lastReached time.Time
	lastError   string
	lastErrorAt time.Time
	versions    []string
	runsTasks   bool
	probedAt    time.Time
}

// NewState returns the state of an upstream no call has reached yet; log
// takes the warnings of its changes.
func NewState(log *zap.Logger) *State { return &State{log: log} }

// StateReport is a State as the admin API shows it.
type StateReport struct {
	// Reachable says whether the last call reached the upstream; absent
	// before any call ended.
	Reachable *bool `json:"reachable,omitempty"`
	// LastReached is when a call last reached it.
	LastReached time.Time `json:"last_reached,omitzero"`
	// LastError is the last failure to reach it (the next handler's text:
	// for operators only, it may name addresses), and LastErrorAt when.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Versions are the protocol versions the last probe found the
	// upstream speaking, and RunsTasksExtension whether it runs 2026-07-28
	// tasks itself; ProbedAt is when (absent before any probe: the gateway
	// probes for the first 2026-07-28 request).
	Versions           []string  `json:"versions,omitempty"`
	RunsTasksExtension bool      `json:"runs_tasks_extension,omitempty"`
	ProbedAt           time.Time `json:"probed_at,omitzero"`
}

// Observe records how a call of the next handler ended: err nil reached
// the upstream; an error that says it never did (Unreachable) is a
// failure; any other (the client left, a connection lost mid-answer)
// says nothing of reachability. The first failure, and the first after the upstream
// was reached again, is logged as a warning; the recovery as info.
func (s *State) Observe(err error, now time.Time) {
	if s == nil {
		return
	}
	switch {
	case err == nil:
		s.mu.Lock()
		was := s.reachable
		s.reachable, s.lastReached = &reachableTrue, now
		s.mu.Unlock()
		if was != nil && !*was {
			s.log.Info("upstream reachable again")
		}
	case Unreachable(err) && !ConnectionLost(err): // a connection lost mid-call reached it
		s.mu.Lock()
		was := s.reachable
		s.reachable, s.lastError, s.lastErrorAt = &reachableFalse, err.Error(), now
		s.mu.Unlock()
		if was == nil || *was {
			s.log.Warn("upstream unreachable: calls and tasks through this route fail until it answers; check the reverse_proxy address",
				zap.Error(err))
		}
	}
}

var reachableTrue, reachableFalse = true, false

// Probed records what a probe of the upstream found.
func (s *State) Probed(versions []string, runsTasks bool, now time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.versions, s.runsTasks, s.probedAt = slices.Clone(versions), runsTasks, now
}

// Report returns the state as the admin API shows it.
func (s *State) Report() StateReport {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := StateReport{LastReached: s.lastReached, LastError: s.lastError, LastErrorAt: s.lastErrorAt,
		Versions: slices.Clone(s.versions), RunsTasksExtension: s.runsTasks, ProbedAt: s.probedAt}
	if s.reachable != nil {
		v := *s.reachable
		r.Reachable = &v
	}
	return r
}
