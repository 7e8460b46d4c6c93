package gate

import (
	"strconv"
	"testing"
	"time"
)

// The limiter's map is bounded: a bucket that has filled up again is
// dropped (a new one would be the same), and past MaxBuckets callers a new
// one is refused until some fill up, so a caller with many addresses cannot
// grow it without limit.
func TestRateLimiterBounded(t *testing.T) {
	t.Parallel()
	l := NewRateLimiter(1) // bursts of 2, full again 2 s after a token is taken
	now := time.Unix(1_000_000, 0)
	for i := range MaxBuckets {
		if ok, _ := l.Allow("ip:"+strconv.Itoa(i), now); !ok {
			t.Fatalf("caller %d refused below the bound", i)
		}
	}
	if ok, _ := l.Allow("ip:one-too-many", now); ok {
		t.Error("a new caller past the bound was admitted")
	}
	if n := len(l.buckets); n > MaxBuckets {
		t.Errorf("%d buckets, bound %d", n, MaxBuckets)
	}
	if ok, _ := l.Allow("ip:0", now); !ok {
		t.Error("a known caller within its burst was refused at the bound")
	}
	later := now.Add(3 * time.Second) // every bucket but ip:0's is full again
	if ok, _ := l.Allow("ip:newcomer", later); !ok {
		t.Error("a new caller was refused after the buckets filled up")
	}
	if n := len(l.buckets); n > 2 {
		t.Errorf("%d buckets after they filled up, want the two in use", n)
	}
	// A caller's spent budget survives the sweeps: dropping its bucket
	// would hand it a new burst.
	for range 2 {
		l.Allow("ip:spender", later)
	}
	for i := range 2048 {
		l.Allow("ip:sweep-"+strconv.Itoa(i), later)
	}
	if ok, _ := l.Allow("ip:spender", later); ok {
		t.Error("a caller over its rate was let through after a sweep")
	}
}

func TestStreamTable(t *testing.T) {
	t.Parallel()
	s := NewStreamTable()
	for i := range MaxStreamsPerOwner {
		if !s.Acquire("alice", StreamListen) {
			t.Fatalf("stream %d refused", i+1)
		}
	}
	tests := []struct {
		key  string
		want bool
	}{{"alice", false}, {"bob", true}}
	for _, tt := range tests {
		if got := s.Acquire(tt.key, StreamResult); got != tt.want {
			t.Errorf("acquire(%s) = %v, want %v", tt.key, got, tt.want)
		}
	}
	s.Release("alice", StreamListen)
	if !s.Acquire("alice", StreamListen) {
		t.Error("a released slot was not reusable")
	}
}

// A check that read the store before the session was forgotten must not
// put the binding back: the ended session would stay usable from the
// cache until its next refresh.
func TestSessionTableForgetWinsOverEarlierCheck(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name       string
		run        func(tb *SessionTable)
		wantCached bool
	}{
		{"remember", func(tb *SessionTable) { tb.Remember("s", "alice", now, tb.Forgets()) }, true},
		{"forget after remember", func(tb *SessionTable) {
			tb.Remember("s", "alice", now, tb.Forgets())
			tb.Forget("s")
		}, false},
		{"check began before the forget", func(tb *SessionTable) {
			since := tb.Forgets() // the check asks the store here
			tb.Forget("s")        // the upstream lost the session meanwhile
			tb.Remember("s", "alice", now, since)
		}, false},
		{"check began after the forget", func(tb *SessionTable) {
			tb.Forget("s")
			tb.Remember("s", "alice", now, tb.Forgets()) // bound again since, in the store
		}, true},
		{"another session forgotten meanwhile", func(tb *SessionTable) {
			since := tb.Forgets()
			tb.Forget("other")
			tb.Remember("s", "alice", now, since)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tb := NewSessionTable(8)
			tt.run(tb)
			owner, _, ok := tb.Lookup("s")
			if ok != tt.wantCached || (ok && owner != "alice") {
				t.Errorf("Lookup = %q, %v; want cached %v", owner, ok, tt.wantCached)
			}
		})
	}
}

// The open streams are counted by kind, for the streams_open gauge: a
// refused stream counts nothing, a released one no more.
func TestStreamTableCountsKinds(t *testing.T) {
	t.Parallel()
	s := NewStreamTable()
	for range 3 {
		s.Acquire("alice", StreamListen)
	}
	s.Acquire("bob", StreamResult)
	for range MaxStreamsPerOwner {
		s.Acquire("carol", StreamResult)
	}
	s.Acquire("carol", StreamResult) // refused: over the owner's bound
	s.Release("alice", StreamListen)
	if got := s.Open(StreamListen); got != 2 {
		t.Errorf("listen streams open = %d, want 2", got)
	}
	if got := s.Open(StreamResult); got != 1+MaxStreamsPerOwner {
		t.Errorf("result streams open = %d, want %d", got, 1+MaxStreamsPerOwner)
	}
	for method, want := range map[string]StreamKind{"subscriptions/listen": StreamListen, "tasks/result": StreamResult} {
		if got := StreamKindOf(method); got != want {
			t.Errorf("StreamKindOf(%s) = %s, want %s", method, got, want)
		}
	}
}
