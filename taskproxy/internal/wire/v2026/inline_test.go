package v2026

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The calls waiting for a plain client's input are the caller's and the
// tool's only, bounded per owner, and cancelled upstream when the
// configuration goes.
func TestInlineWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, inlineWaits)
}

func inlineWaits(t *testing.T) {
	var cancels atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tasks/cancel" {
			cancels.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`))
	})
	// The cancellations run on a pool of runners made in the bubble (the
	// shared pool's idle runners wait on a channel of no bubble, so the
	// bubble's clock could not move); its idle runners end, on the
	// bubble's clock, as the test ends.
	const idle = time.Minute
	t.Cleanup(func() { time.Sleep(idle + time.Second) })
	base := httptest.NewRequestWithContext(runners.WithPool(context.Background(), runners.NewPool(idle)), http.MethodPost, "/mcp", nil)
	wait := func(owner string) *inlineWait {
		return &inlineWait{owner: owner, tool: "interview", upstreamTaskID: "up-" + owner, params: []byte(`{}`), base: base, next: up, release: func() {}}
	}
	h := NewHandler(2)
	first, e := h.park(wait("alice"))
	if e != nil {
		t.Fatal(e)
	}
	if _, e := h.park(wait("alice")); e != nil {
		t.Fatal(e)
	}
	if _, e := h.park(wait("alice")); e == nil || e.Code != jsonrpc.CodeTooManyTasks {
		t.Errorf("alice's third wait: %v, want -32000 (limit 2)", e)
	}
	if _, e := h.park(wait("bob")); e != nil {
		t.Errorf("bob's wait refused: %v", e)
	}
	tests := []struct {
		name, state, owner, tool string
		ok                       bool
	}{
		{"another owner", first, "bob", "interview", false},
		{"another tool", first, "alice", "steps", false},
		{"unknown state", "nope", "alice", "interview", false},
		{"the caller's", first, "alice", "interview", true},
		{"spent", first, "alice", "interview", false},
	}
	for _, tt := range tests {
		if _, ok := h.take(tt.state, tt.owner, tt.tool); ok != tt.ok {
			t.Errorf("%s: take %v, want %v", tt.name, ok, tt.ok)
		}
	}
	if _, e := h.park(wait("alice")); e != nil {
		t.Errorf("alice's wait after one was taken: %v", e)
	}
	h.Close()
	synctest.Wait() // every cancellation sent has arrived
	if n := cancels.Load(); n != 3 {
		t.Errorf("%d upstream tasks cancelled at close, want the 3 still waiting", n)
	}
}
