package wire

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
)

func newTestProbes() *Probes {
	return NewProbes(zap.NewNop(), func(r *http.Request) *http.Request { return r.Clone(r.Context()) })
}

func endpointRequest(endpoint string) *http.Request {
	return httptest.NewRequest(http.MethodPost, endpoint, http.NoBody)
}

// Cached reads what the table holds after each of its changes: a verdict
// kept, replaced, forgotten, evicted by newer ones or gone stale.
func TestProbesCachedFollowsTheTable(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := newTestProbes()
		pool := bubblePool(t)
		cached := func(endpoint string) string {
			v, ok := p.Cached(endpointRequest(endpoint))
			switch {
			case !ok:
				return "none"
			case v.V2025:
				return "2025"
			}
			return "2026"
		}
		steps := []struct {
			name     string
			change   func()
			endpoint string
			want     string
		}{
			{"empty", func() {}, "/mcp", "none"},
			{"confirmed 2025-11-25", func() { p.ConfirmV2025("/mcp") }, "/mcp", "2025"},
			{"another endpoint", func() {}, "/other", "none"},
			{"forgotten", func() { p.Forget("/mcp") }, "/mcp", "none"},
			{"probed", func() { p.Verdict(probeRequestOn(pool, "a.example"), &discoverCounter{}) }, "/mcp", "2026"},
			{"a confirm leaves a fresh verdict", func() { p.ConfirmV2025("/mcp") }, "/mcp", "2026"},
			{"stale", func() { time.Sleep(ProbeTTL) }, "/mcp", "none"},
			{"confirmed once stale", func() { p.ConfirmV2025("/mcp") }, "/mcp", "2025"},
			{"evicted by newer endpoints", func() {
				for i := range MaxProbeVerdicts {
					p.ConfirmV2025(fmt.Sprintf("/e%d", i))
				}
			}, "/mcp", "none"},
			{"the newest kept", func() {}, fmt.Sprintf("/e%d", MaxProbeVerdicts-1), "2025"},
			{"all forgotten", p.ForgetAll, "/e1", "none"},
		}
		for _, st := range steps {
			st.change()
			if got := cached(st.endpoint); got != st.want {
				t.Errorf("%s: Cached(%s) = %s, want %s", st.name, st.endpoint, got, st.want)
			}
		}
		if p.Len() != 0 {
			t.Errorf("%d verdicts kept after ForgetAll", p.Len())
		}
	})
}

// Cached reads the table without changing it, so without its lock (a
// read that moved the verdict to the front of the table was a write under
// it, on every request), and it reads during a change, the verdicts as
// they were before.
func TestProbesCachedTakesNoLock(t *testing.T) {
	t.Parallel()
	p := newTestProbes()
	p.ConfirmV2025("/a")
	p.ConfirmV2025("/b")
	before := fmt.Sprint(p.verdicts.Keys())
	if _, ok := p.Cached(endpointRequest("/a")); !ok {
		t.Fatal("no verdict for /a")
	}
	if after := fmt.Sprint(p.verdicts.Keys()); after != before {
		t.Errorf("Cached reordered the table: %s, was %s", after, before)
	}
	p.mu.Lock() // a change under way
	defer p.mu.Unlock()
	read := make(chan bool)
	go func() {
		v, ok := p.Cached(endpointRequest("/b"))
		read <- ok && v.V2025
	}()
	select {
	case ok := <-read:
		if !ok {
			t.Error("Cached did not read the verdict kept before the change")
		}
	case <-time.After(time.Minute): // a deadline for a hang, not a timing
		t.Fatal("Cached waited for the table's lock")
	}
}

// Changes and lock-free reads at once (run with -race).
func TestProbesCachedConcurrent(t *testing.T) {
	t.Parallel()
	p := newTestProbes()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				endpoint := fmt.Sprintf("/e%d", (w*200+i)%(2*MaxProbeVerdicts))
				switch i % 4 {
				case 0, 1:
					p.ConfirmV2025(endpoint)
				case 2:
					p.Forget(endpoint)
				case 3:
					if v, ok := p.Cached(endpointRequest(endpoint)); ok && !v.V2025 {
						t.Errorf("Cached(%s) read %+v, a verdict never kept", endpoint, v)
					}
				}
			}
		})
	}
	wg.Wait()
	if n := p.Len(); n > MaxProbeVerdicts {
		t.Errorf("%d verdicts kept, at most %d", n, MaxProbeVerdicts)
	}
}

// A change is what Cached reads once the change returns, whatever other
// endpoints' changes run meanwhile: a verdict kept is read, and one
// forgotten is never read from an older copy (run with -race).
func TestProbesCachedReadsEachChangeOnceItReturns(t *testing.T) {
	t.Parallel()
	p := newTestProbes()
	var wg sync.WaitGroup
	for w := range 6 {
		own := endpointRequest(fmt.Sprintf("/own%d", w))
		wg.Go(func() {
			for range 300 {
				p.ConfirmV2025(own.URL.Path)
				if _, ok := p.Cached(own); !ok {
					t.Errorf("Cached(%s) missed the verdict just kept", own.URL.Path)
					return
				}
				p.Forget(own.URL.Path)
				if v, ok := p.Cached(own); ok {
					t.Errorf("Cached(%s) read %+v, a verdict just forgotten", own.URL.Path, v)
					return
				}
			}
		})
	}
	// Other endpoints change all along, fewer than the table holds, so
	// that no eviction takes an endpoint above out.
	for w := range 2 {
		wg.Go(func() {
			for i := range 600 {
				endpoint := fmt.Sprintf("/other%d", (w*600+i)%(MaxProbeVerdicts/2))
				if i%2 == 0 {
					p.ConfirmV2025(endpoint)
				} else {
					p.Forget(endpoint)
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkProbesCached is the verdict a 2025-11-25 request without a
// session reads on every request (the reverse bridge's check), from every
// core at once.
func BenchmarkProbesCached(b *testing.B) {
	p := newTestProbes()
	p.ConfirmV2025("/mcp")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := endpointRequest("/mcp")
		for pb.Next() {
			if v, ok := p.Cached(r); !ok || !v.V2025 {
				b.Fatal("no verdict")
			}
		}
	})
}
