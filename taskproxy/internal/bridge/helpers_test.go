package bridge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
)

// post is a client's POST to /mcp with headers (name, value, ...).
func post(body string, headers ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	return r
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bubbleRequest returns a base request for sessions of a test in a
// testing/synctest bubble: its upstream calls run on a pool of runners made
// in the bubble (the shared pool's idle runners wait on a channel of no
// bubble, so the bubble's clock could not move), whose idle runners end on
// the bubble's clock as the test ends.
func bubbleRequest(t *testing.T) *http.Request {
	t.Helper()
	const idle = time.Minute
	t.Cleanup(func() { time.Sleep(idle + time.Second) })
	ctx := runners.WithPool(context.Background(), runners.NewPool(idle))
	return httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", nil)
}

// stepClock is a table's clock under the test's control: each reading is a
// millisecond after the one before (so the order of uses is never a tie),
// and advance moves it on.
type stepClock struct {
	mu sync.Mutex
	at time.Time
}

func (c *stepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(time.Millisecond)
	return c.at
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = c.at.Add(d)
}

// steppedTable is newBridgeSessions on a stepClock.
func steppedTable(max int, idle time.Duration) (*bridgeSessions, *stepClock) {
	c := &stepClock{at: time.Unix(1_800_000_000, 0)}
	tab := newBridgeSessions(max, idle)
	tab.now = c.now
	return tab, c
}
