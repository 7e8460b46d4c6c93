package v2026

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The calls waiting for a plain client's input are the caller's and the
// tool's only, bounded per owner, and cancelled upstream when the
// configuration goes.
func TestInlineWaits(t *testing.T) {
	t.Parallel()
	var cancels atomic.Int32
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tasks/cancel" {
			cancels.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`))
	})
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
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
	deadline := time.Now().Add(10 * time.Second)
	for cancels.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := cancels.Load(); n != 3 {
		t.Errorf("%d upstream tasks cancelled at close, want the 3 still waiting", n)
	}
}
