package runtime

import "sync"

// InlineCalls counts, per quota (an owner, or an anonymous caller's client
// address), the plain clients' calls whose upstream
// task the gateway waits for within the call itself (a client without the
// tasks extension, or a 2025-11-25 client through the reverse version
// bridge, calling a tool the upstream runs only as a task; no task of the
// gateway's is made). Each holds a task running at the upstream on
// the caller's behalf, so each counts as an active task against the
// owner's bound, from its admission until the upstream's task ends or is
// cancelled, waits for input included. So does a call whose client left
// before it became a task, while the gateway still reads whether the
// upstream made a task of it, to cancel that task. The zero value is
// ready to use.
type InlineCalls struct {
	mu sync.Mutex
	n  map[string]int
}

// Admit takes a slot for one of owner's calls when owner's other active
// tasks (active, plus the calls already admitted) leave room under limit
// (0: no bound); ok false refuses it. Admissions of one owner are
// serialized, so concurrent calls never overshoot the bound among
// themselves. The slot is given back with the returned release, once.
func (ic *InlineCalls) Admit(owner string, limit int, active func() (int, error)) (release func(), ok bool, err error) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if limit > 0 {
		n, err := active()
		if err != nil {
			return nil, false, err
		}
		if n+ic.n[owner] >= limit {
			return nil, false, nil
		}
	}
	if ic.n == nil {
		ic.n = map[string]int{}
	}
	ic.n[owner]++
	var once sync.Once
	return func() { once.Do(func() { ic.done(owner) }) }, true, nil
}

func (ic *InlineCalls) done(owner string) {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	if ic.n[owner]--; ic.n[owner] <= 0 {
		delete(ic.n, owner)
	}
}

// Count is how many of owner's calls hold a slot now.
func (ic *InlineCalls) Count(owner string) int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	return ic.n[owner]
}

// Total is how many calls of every owner hold a slot now: what the
// operator sees of them (they are no tasks of the gateway's).
func (ic *InlineCalls) Total() int {
	ic.mu.Lock()
	defer ic.mu.Unlock()
	n := 0
	for _, k := range ic.n {
		n += k
	}
	return n
}
