package upstream

import (
	"context"
	"fmt"
	"sync"
)

// observer counts tool invocations and cancellations so that tests can
// assert on what the upstream saw, not just on what a gateway relayed.
type observer struct {
	mu      sync.Mutex
	calls   map[string]int
	cancels map[string]int
	// changed is closed and replaced on every update, waking all waiters
	// without polling.
	changed chan struct{}
}

func (o *observer) init() {
	o.calls = make(map[string]int)
	o.cancels = make(map[string]int)
	o.changed = make(chan struct{})
}

func (o *observer) add(counts map[string]int, tool string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	counts[tool]++
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *observer) get(counts map[string]int, tool string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return counts[tool]
}

func (o *observer) wait(ctx context.Context, counts map[string]int, what, tool string, n int) error {
	for {
		o.mu.Lock()
		got, changed := counts[tool], o.changed
		o.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d %s of %q (saw %d): %w", n, what, tool, got, ctx.Err())
		}
	}
}

// Calls reports how many times the handler of tool was invoked. Every round
// of a multi-round-trip call counts.
func (s *Server) Calls(tool string) int { return s.obs.get(s.obs.calls, tool) }

// Cancellations reports how many invocations of tool ended because their
// context was cancelled before the tool finished.
func (s *Server) Cancellations(tool string) int { return s.obs.get(s.obs.cancels, tool) }

// WaitCalls blocks until tool has been invoked at least n times, or ctx is
// done.
func (s *Server) WaitCalls(ctx context.Context, tool string, n int) error {
	return s.obs.wait(ctx, s.obs.calls, "calls", tool, n)
}

// WaitCancellations blocks until at least n invocations of tool have been
// cancelled, or ctx is done.
func (s *Server) WaitCancellations(ctx context.Context, tool string, n int) error {
	return s.obs.wait(ctx, s.obs.cancels, "cancellations", tool, n)
}
