package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Sessions are keyed by the names of the capabilities a request declares,
// not their contents: a caller varying them shares one session per set of
// names, at most eight.
func TestBridgeSessionKeyNames(t *testing.T) {
	t.Parallel()
	key := func(owner, caps string) string {
		c := &call{Exchange: &wire.Exchange{Owner: owner, R: post(`{}`)}}
		return c.bridgeSessionKey(v2026.RequestMeta{Capabilities: json.RawMessage(caps)})
	}
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"contents of roots differ", `{"roots":{"x1":1}}`, `{"roots":{"x2":1}}`, true},
		{"contents of elicitation differ", `{"elicitation":{"form":{}}}`, `{"elicitation":{"form":{},"url":{}}}`, true},
		{"capabilities the bridge does not use", `{}`, `{"experimental":{"a":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`, true},
		{"order", `{"sampling":{},"roots":{}}`, `{"roots":{},"sampling":{}}`, true},
		{"a name more", `{"roots":{}}`, `{"roots":{},"sampling":{}}`, false},
		{"not an object is not declared", `{"roots":true}`, `{}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if same := key("bob", tt.a) == key("bob", tt.b); same != tt.same {
				t.Errorf("keys of %s and %s the same: %v, want %v", tt.a, tt.b, same, tt.same)
			}
		})
	}
	if key("bob", `{"roots":{}}`) == key("alice", `{"roots":{}}`) {
		t.Errorf("two principals share a key")
	}
	keys := map[string]bool{}
	for i := range 600 {
		keys[key("bob", fmt.Sprintf(`{"roots":{"x%d":1},"sampling":{"y%d":{}}}`, i, i%3))] = true
	}
	if len(keys) != 1 {
		t.Errorf("600 requests of varied contents made %d keys, want 1", len(keys))
	}
}

// task.Anonymous callers are one owner, but an upstream that authenticates them
// itself tells them apart by their Authorization: a session opened with one
// caller's credentials never serves another's. Authenticated callers are
// told apart by their owner already, whatever token they present.
func TestBridgeSessionKeyCredentials(t *testing.T) {
	t.Parallel()
	key := func(owner, authorization string) string {
		r := post(`{}`)
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		c := &call{Exchange: &wire.Exchange{Owner: owner, R: r}}
		return c.bridgeSessionKey(v2026.RequestMeta{Capabilities: json.RawMessage(`{}`)})
	}
	tests := []struct {
		name      string
		ownerA, a string
		ownerB, b string
		same      bool
	}{
		{"anonymous, two tokens", task.Anonymous, "Bearer alice-token", task.Anonymous, "Bearer bob-token", false},
		{"anonymous, one token", task.Anonymous, "Bearer alice-token", task.Anonymous, "Bearer alice-token", true},
		{"anonymous, token and none", task.Anonymous, "Bearer alice-token", task.Anonymous, "", false},
		{"anonymous, none", task.Anonymous, "", task.Anonymous, "", true},
		{"a principal, two of its tokens", "p2|alice", "Bearer t1", "p2|alice", "Bearer t2", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if same := key(tt.ownerA, tt.a) == key(tt.ownerB, tt.b); same != tt.same {
				t.Errorf("the same session: %v, want %v", same, tt.same)
			}
		})
	}
	if k := key(task.Anonymous, "Bearer alice-token"); strings.Contains(k, "alice-token") {
		t.Errorf("the key %q holds the token", k)
	}
}

// The table stays within its bound: a full table makes room with the new
// session's owner's idle sessions first, with others' only while that
// owner holds less than its share, and refuses a session when every one is
// in use; one owner holds at most maxBridgeSessionsPerOwner.
func TestBridgeSessionFairness(t *testing.T) {
	t.Parallel()
	type step struct {
		owner, key string
		release    bool // release the session at once
		refused    bool
	}
	tests := []struct {
		name    string
		max     int
		steps   []step
		evicted []string // the keys ended upstream, in any order
		left    []string
	}{
		{"full: the owner's own idle session goes first", 3, []step{
			{owner: "alice", key: "a1", release: true},
			{owner: "bob", key: "b1", release: true},
			{owner: "bob", key: "b2", release: true},
			{owner: "bob", key: "b3", release: true},
		}, []string{"b1"}, []string{"a1", "b2", "b3"}},
		{"full: an owner at its share does not evict others", 4, []step{
			{owner: "alice", key: "a1", release: true},
			{owner: "bob", key: "b1"}, {owner: "bob", key: "b2"}, {owner: "bob", key: "b3"},
			{owner: "bob", key: "b4", refused: true},
		}, nil, []string{"a1", "b1", "b2", "b3"}},
		{"full: an owner below its share evicts the least recently used", 2, []step{
			{owner: "alice", key: "a1", release: true},
			{owner: "alice", key: "a2", release: true},
			{owner: "carol", key: "c1", release: true},
		}, []string{"a1"}, []string{"a2", "c1"}},
		{"full and all in use: refused, never over the bound", 2, []step{
			{owner: "alice", key: "a1"}, {owner: "bob", key: "b1"},
			{owner: "carol", key: "c1", refused: true},
		}, nil, []string{"a1", "b1"}},
		{"one owner's bound", 100, []step{
			{owner: "bob", key: "b1", release: true},
			{owner: "bob", key: "b2"}, {owner: "bob", key: "b3"}, {owner: "bob", key: "b4"}, {owner: "bob", key: "b5"},
			{owner: "bob", key: "b6"}, {owner: "bob", key: "b7"}, {owner: "bob", key: "b8"},
			{owner: "bob", key: "b9"}, // takes b1's place
			{owner: "bob", key: "b10", refused: true},
			{owner: "alice", key: "a1"},
		}, []string{"b1"}, []string{"b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "a1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				up := &deleteRecorder{}
				base := bubbleRequest(t)
				tab, _ := steppedTable(tt.max, time.Hour) // each use a millisecond after the one before
				defer tab.close()
				for _, st := range tt.steps {
					s, err := tab.acquire(context.Background(), st.owner, st.key, func(context.Context) (*bridgeSession, error) {
						return &bridgeSession{id: st.key, version: "2025-11-25", base: base, next: up}, nil
					})
					if (err != nil) != st.refused {
						t.Fatalf("%s %s: err %v, want refused %v", st.owner, st.key, err, st.refused)
					}
					if err == nil && st.release {
						s.release()
					}
				}
				synctest.Wait() // every DELETE sent has arrived
				if got := up.ended(); !sameSet(got, tt.evicted) {
					t.Errorf("ended %v, want %v", got, tt.evicted)
				}
				tab.mu.Lock()
				var left []string
				for k := range tab.byKey {
					left = append(left, k)
				}
				tab.mu.Unlock()
				if !sameSet(left, tt.left) || len(left) > tt.max {
					t.Errorf("table %v, want %v", left, tt.left)
				}
			})
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]int{}
	for _, x := range a {
		in[x]++
	}
	for _, x := range b {
		if in[x]--; in[x] < 0 {
			return false
		}
	}
	return true
}

// A session the upstream no longer knows leaves the table and its owner's
// count, by drop or by dropID: the owner may open others in its place.
func TestBridgeSessionDropCounts(t *testing.T) {
	t.Parallel()
	up := &deleteRecorder{}
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	tab := newBridgeSessions(100, time.Hour)
	defer tab.close()
	for i := range maxBridgeSessionsPerOwner {
		key := fmt.Sprintf("k%d", i)
		s, err := tab.acquire(context.Background(), "bob", key, func(context.Context) (*bridgeSession, error) {
			return &bridgeSession{id: key, version: "2025-11-25", base: base, next: up}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			tab.drop(s)
		} else {
			tab.dropID(key)
		}
	}
	tab.mu.Lock()
	n, left := tab.owners["bob"], len(tab.byKey)
	tab.mu.Unlock()
	if n != 0 || left != 0 {
		t.Errorf("after dropping all: bob counted %d, table %d; want 0, 0", n, left)
	}
}

// task.Anonymous callers are one owner to the session table's limits, whatever
// Authorization each sends: one caller making up a token per call must not
// take every session of the route and evict the others' idle ones.
func TestBridgeAnonymousCredentialsShareOneQuota(t *testing.T) {
	t.Parallel()
	tab := newBridgeSessions(8, time.Hour)
	defer tab.close()
	open := func(context.Context) (*bridgeSession, error) { return &bridgeSession{id: "up"}, nil }
	meta := v2026.RequestMeta{Capabilities: json.RawMessage(`{}`)}
	hold := func(owner, authorization string, endpoint int) (*bridgeSession, error) {
		// Each endpoint is a session of its own.
		r := httptest.NewRequest(http.MethodPost, fmt.Sprintf("/mcp%d", endpoint), strings.NewReader(`{}`))
		if authorization != "" {
			r.Header.Set("Authorization", authorization)
		}
		c := &call{Exchange: &wire.Exchange{Owner: owner, R: r}}
		return c.acquireBridgeSessionIn(tab, meta, open)
	}
	for _, owner := range []string{"p2|alice", "p2|bob"} {
		for i := range 4 {
			s, err := hold(owner, "Bearer "+owner, i)
			if err != nil {
				t.Fatal(err)
			}
			s.release() // idle: evictable
		}
	}
	for i := range 8 {
		if s, err := hold(task.Anonymous, fmt.Sprintf("Bearer junk-%d", i), 0); err == nil {
			defer s.release() // held: the anonymous caller keeps what it got
		}
	}
	tab.mu.Lock()
	defer tab.mu.Unlock()
	if n := tab.owners[task.Anonymous]; n > 8/3+1 {
		t.Errorf("the anonymous caller holds %d of 8 sessions, want at most its fair share", n)
	}
	for _, owner := range []string{"p2|alice", "p2|bob"} {
		if tab.owners[owner] == 0 {
			t.Errorf("%s's idle session was evicted for made-up anonymous credentials", owner)
		}
	}
}
