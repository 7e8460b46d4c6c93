package bridge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

// deleteRecorder is an upstream that records the sessions ended with DELETE.
type deleteRecorder struct {
	mu      sync.Mutex
	deleted []string
}

func (d *deleteRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		d.mu.Lock()
		d.deleted = append(d.deleted, r.Header.Get(upstream.HeaderSessionID))
		d.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func (d *deleteRecorder) ended() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.deleted...)
}

func TestBridgeSessionTable(t *testing.T) {
	t.Parallel()
	up := &deleteRecorder{}
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	opens := map[string]int{}
	var mu sync.Mutex
	open := func(id string) func(context.Context) (*bridgeSession, error) {
		return func(context.Context) (*bridgeSession, error) {
			mu.Lock()
			opens[id]++
			mu.Unlock()
			return &bridgeSession{id: id, version: "2025-11-25", base: base, next: up}, nil
		}
	}
	ctx := context.Background()
	tab, _ := steppedTable(2, time.Hour)
	defer tab.close()

	a1, _ := tab.acquire(ctx, "alice", "alice", open("s-alice"))
	a2, _ := tab.acquire(ctx, "alice", "alice", open("s-alice-2"))
	b, _ := tab.acquire(ctx, "bob", "bob", open("s-bob"))
	if a1 != a2 || a1.id != "s-alice" || b.id != "s-bob" || opens["s-alice-2"] != 0 {
		t.Fatalf("a key's callers must share one session, keys must not: alice %s/%s bob %s", a1.id, a2.id, b.id)
	}
	// At the bound, all in use: nothing is evicted, and the new session
	// is refused rather than exceed the bound.
	if _, err := tab.acquire(ctx, "carol", "carol", open("s-carol")); err == nil || len(tab.byKey) != 2 {
		t.Errorf("a session over the bound with all in use: err %v, table %d; want refused, 2", err, len(tab.byKey))
	}
	// Released, the least recently used goes at the next open, ended upstream.
	a1.release()
	a2.release()
	b.release()
	c, _ := tab.acquire(ctx, "carol", "carol", open("s-carol"))
	c.release()
	d, _ := tab.acquire(ctx, "dave", "dave", open("s-dave"))
	d.release()
	waitUntil(t, func() bool { return len(up.ended()) == 2 })
	if got := strings.Join(up.ended(), ","); !strings.Contains(got, "s-alice") || len(tab.byKey) != 2 {
		t.Errorf("evicted %s (table %d), want alice's first", got, len(tab.byKey))
	}
	// A dropped session is opened anew.
	cc, _ := tab.acquire(ctx, "carol", "carol", open("s-carol-2"))
	tab.drop(cc)
	cc.release()
	cc2, _ := tab.acquire(ctx, "carol", "carol", open("s-carol-3"))
	if cc2.id != "s-carol-3" {
		t.Errorf("after drop: %s, want a new session", cc2.id)
	}
	// Closing ends the idle sessions at once, the one in use when released.
	before := len(up.ended())
	tab.close()
	waitUntil(t, func() bool { return len(up.ended()) == before+1 })
	cc2.release()
	waitUntil(t, func() bool { return len(up.ended()) == before+2 })
	if _, err := tab.acquire(ctx, "erin", "erin", open("s-erin")); err == nil {
		t.Errorf("a closed table opened a session")
	}
}

func TestBridgeSessionIdleExpiry(t *testing.T) {
	t.Parallel()
	up := &deleteRecorder{}
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	tab, clock := steppedTable(10, time.Minute)
	defer tab.close()
	open := func(id string) func(context.Context) (*bridgeSession, error) {
		return func(context.Context) (*bridgeSession, error) {
			return &bridgeSession{id: id, version: "2025-11-25", base: base, next: up}, nil
		}
	}
	s, _ := tab.acquire(context.Background(), "alice", "alice", open("s-1"))
	s.release()
	clock.advance(time.Minute)
	s2, _ := tab.acquire(context.Background(), "bob", "bob", open("s-2"))
	defer s2.release()
	waitUntil(t, func() bool { return len(up.ended()) == 1 })
	if up.ended()[0] != "s-1" {
		t.Errorf("ended %v, want the idle s-1", up.ended())
	}
}
