package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Session bindings: a session belongs to the owner that bound it and to no
// one else, until forgotten or idle for its ttl.

func testSessions(t *testing.T, s task.Store) {
	ctx := context.Background()
	if err := s.BindSession(ctx, "S1", "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		op   func() error
		want error // nil, ErrForeign, or ErrNotFound meaning exactly that (not ErrForeign)
	}{
		{"owner checks", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, nil},
		{"owner checks and refreshes", func() error { return s.CheckSession(ctx, "S1", "alice", time.Hour) }, nil},
		{"another owner", func() error { return s.CheckSession(ctx, "S1", "bob", 0) }, task.ErrForeign},
		{"another owner refreshing", func() error { return s.CheckSession(ctx, "S1", "bob", time.Hour) }, task.ErrForeign},
		{"unknown session", func() error { return s.CheckSession(ctx, "S2", "alice", 0) }, task.ErrNotFound},
		{"a refresh does not create a binding", func() error { return s.CheckSession(ctx, "S2", "alice", time.Hour) }, task.ErrNotFound},
		{"still unknown", func() error { return s.CheckSession(ctx, "S2", "alice", 0) }, task.ErrNotFound},
		{"binding to another owner refused", func() error { return s.BindSession(ctx, "S1", "bob", time.Hour) }, task.ErrForeign},
		{"still the owner's", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, nil},
		{"owner binds again", func() error { return s.BindSession(ctx, "S1", "alice", time.Hour) }, nil},
		{"a prefix of the id is another session", func() error { return s.CheckSession(ctx, "S", "alice", 0) }, task.ErrNotFound},
		{"forget", func() error { return s.ForgetSession(ctx, "S1") }, nil},
		{"forgotten", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, task.ErrNotFound},
		{"forget unknown", func() error { return s.ForgetSession(ctx, "S9") }, nil},
		{"a forgotten session can be bound by anyone", func() error { return s.BindSession(ctx, "S1", "bob", time.Hour) }, nil},
		{"now bob's", func() error { return s.CheckSession(ctx, "S1", "bob", 0) }, nil},
		{"not alice's", func() error { return s.CheckSession(ctx, "S1", "alice", 0) }, task.ErrForeign},
	}
	for _, tt := range tests {
		err := tt.op()
		switch {
		case tt.want == nil && err != nil,
			tt.want != nil && !errors.Is(err, tt.want),
			errors.Is(tt.want, task.ErrNotFound) && !errors.Is(tt.want, task.ErrForeign) && errors.Is(err, task.ErrForeign):
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// A binding idle for its ttl expires; a refresh extends it; once expired,
// another owner may bind the id.
func testSessionExpires(t *testing.T, s task.Store) {
	ctx := context.Background()
	for _, id := range []string{"short", "refreshed"} {
		if err := s.BindSession(ctx, id, "alice", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckSession(ctx, "refreshed", "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a binding with a 1s ttl expires", func() bool {
		return errors.Is(s.CheckSession(ctx, "short", "alice", 0), task.ErrNotFound)
	})
	if err := s.CheckSession(ctx, "short", "alice", 0); errors.Is(err, task.ErrForeign) {
		t.Errorf("an expired binding: %v, want plain ErrNotFound", err)
	}
	if err := s.CheckSession(ctx, "refreshed", "alice", 0); err != nil {
		t.Errorf("a binding refreshed to an hour expired: %v", err)
	}
	if err := s.BindSession(ctx, "short", "bob", time.Hour); err != nil {
		t.Errorf("binding an expired session id: %v", err)
	}
	if err := s.CheckSession(ctx, "short", "alice", 0); !errors.Is(err, task.ErrForeign) {
		t.Errorf("after bob bound the expired id: alice gets %v, want ErrForeign", err)
	}
}

// Of owners racing to bind one new session exactly one gets it.
func testSessionBindRace(t *testing.T, s task.Store) {
	ctx := context.Background()
	for round := range 10 {
		id := "race-" + string(rune('a'+round))
		var mu sync.Mutex
		var winners []string
		var wg sync.WaitGroup
		for _, owner := range []string{"alice", "bob", "carol", "dave"} {
			wg.Go(func() {
				err := s.BindSession(ctx, id, owner, time.Hour)
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, owner)
					mu.Unlock()
				case !errors.Is(err, task.ErrForeign):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %v all bound one session", round, winners)
		}
		if err := s.CheckSession(ctx, id, winners[0], 0); err != nil {
			t.Errorf("round %d: the winner %s: %v", round, winners[0], err)
		}
	}
}
