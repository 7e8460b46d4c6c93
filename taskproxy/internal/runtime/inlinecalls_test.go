package runtime

import (
	"errors"
	"testing"
)

// TestInlineCalls: slots are taken up to the bound, counting the owner's
// other active tasks; a release gives one back once, however often it is
// called; other owners and an unbounded limit are not held back; a count
// that fails refuses nothing silently.
func TestInlineCalls(t *testing.T) {
	t.Parallel()
	var ic InlineCalls
	active := func(n int) func() (int, error) { return func() (int, error) { return n, nil } }
	r1, ok, err := ic.Admit("ann", 3, active(1))
	if !ok || err != nil {
		t.Fatalf("first call: %v %v", ok, err)
	}
	if _, ok, _ = ic.Admit("ann", 3, active(1)); !ok {
		t.Fatal("second call refused under the bound")
	}
	if _, ok, _ = ic.Admit("ann", 3, active(1)); ok {
		t.Fatal("third call admitted with 1 task and 2 calls under a bound of 3")
	}
	if _, ok, _ = ic.Admit("bo", 3, active(0)); !ok {
		t.Fatal("another owner's call refused")
	}
	r1()
	r1()
	if n := ic.Count("ann"); n != 1 {
		t.Fatalf("ann holds %d slots after one release (called twice), want 1", n)
	}
	if _, ok, _ = ic.Admit("ann", 0, active(100)); !ok {
		t.Fatal("a call refused with no bound")
	}
	failing := errors.New("store down")
	if _, ok, err = ic.Admit("ann", 3, func() (int, error) { return 0, failing }); ok || !errors.Is(err, failing) {
		t.Fatalf("admit with a failing count: %v %v, want refused with the error", ok, err)
	}
}
