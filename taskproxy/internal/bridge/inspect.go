package bridge

// What the bridge holds, counted: for health checks and the tests that
// hold it to its bounds.

// Verdicts is the number of endpoints whose probe answer the bridge keeps.
func (b *Bridge) Verdicts() int { return b.Probes.Len() }

// Parked is the number of owner's calls waiting for the client's retry
// with inputResponses.
func (b *Bridge) Parked(owner string) int {
	b.parked.mu.Lock()
	defer b.parked.mu.Unlock()
	return b.parked.byOwner[owner]
}
