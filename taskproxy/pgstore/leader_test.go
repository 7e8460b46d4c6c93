package pgstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Of replicas racing for a leadership exactly one leads; the leader renews
// it, others take it only once its term ran out.
func TestTryLead(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	a, b := open(t, schema), open(t, schema)
	ctx := context.Background()
	var leaders atomic.Int64
	var wg sync.WaitGroup
	for _, s := range []interface {
		TryLead(context.Context, string, string, time.Duration) (bool, error)
		Holder() string
	}{a, b, a, b} {
		wg.Go(func() {
			ok, err := s.TryLead(ctx, "sweeper", s.Holder(), time.Hour)
			if err != nil {
				t.Error(err)
			}
			if ok {
				leaders.Add(1)
			}
		})
	}
	wg.Wait()
	// a and b each tried twice: the winner's second try renews.
	if n := leaders.Load(); n != 2 {
		t.Fatalf("%d successful tries of 4, want the winner's 2", n)
	}
	first, second := a, b
	if ok, _ := a.TryLead(ctx, "sweeper", a.Holder(), time.Hour); !ok {
		first, second = b, a
	}
	if ok, err := second.TryLead(ctx, "sweeper", second.Holder(), time.Hour); ok || err != nil {
		t.Fatalf("the other replica led during the leader's term: %v, %v", ok, err)
	}
	if ok, err := first.TryLead(ctx, "other duty", second.Holder(), time.Hour); !ok || err != nil {
		t.Fatalf("a second duty is led separately: %v, %v", ok, err)
	}
	// The leader's term runs out (a renewal for no time: it ends as it
	// begins, and a term ending no later than now has run out): the other
	// takes over, without waiting for a clock.
	if ok, _ := first.TryLead(ctx, "sweeper", first.Holder(), 0); !ok {
		t.Fatal("the leader could not renew")
	}
	if ok, err := second.TryLead(ctx, "sweeper", second.Holder(), time.Hour); !ok || err != nil {
		t.Fatalf("the other replica did not take over an expired leadership: %v, %v", ok, err)
	}
	if ok, _ := first.TryLead(ctx, "sweeper", first.Holder(), time.Hour); ok {
		t.Fatal("the old leader took the leadership back during the new term")
	}
}
