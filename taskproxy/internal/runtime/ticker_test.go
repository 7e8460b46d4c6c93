package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A maintenance loop's rounds come an interval apart, the interval read
// again before each wait; a wake runs a round at once; the loop stops
// when its context ends.
func TestTicker(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var interval atomic.Int64
		interval.Store(int64(10 * time.Second))
		wake := make(chan struct{})
		rounds := make(chan time.Duration, 16)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			ticker{interval: func() time.Duration { return time.Duration(interval.Load()) }, wake: wake}.run(ctx, func(now time.Time) {
				rounds <- now.Sub(start)
			})
		}()
		expect := func(want time.Duration) {
			t.Helper()
			synctest.Wait()
			select {
			case got := <-rounds:
				if got != want {
					t.Fatalf("round at %v, want %v", got, want)
				}
			default:
				t.Fatalf("no round by %v, want one at %v", time.Since(start), want)
			}
		}
		time.Sleep(10 * time.Second)
		expect(10 * time.Second)
		time.Sleep(10 * time.Second)
		expect(20 * time.Second)
		interval.Store(int64(time.Minute)) // read before the wait after the next round
		time.Sleep(10 * time.Second)
		expect(30 * time.Second)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if len(rounds) != 0 {
			t.Fatalf("a round %v after the interval grew to a minute", <-rounds)
		}
		wake <- struct{}{}
		expect(60 * time.Second)
		time.Sleep(time.Minute) // the wait began again at the wake's round
		expect(120 * time.Second)
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the loop runs on after its context ended")
		}
	})
}

// A round that takes longer than the interval is followed by the next at
// once, not an interval later.
func TestTickerLongRound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var at []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			every(10*time.Second).run(ctx, func(now time.Time) {
				at = append(at, now.Sub(start))
				if len(at) == 1 {
					time.Sleep(25 * time.Second)
				}
				if len(at) == 2 {
					cancel()
				}
			})
		}()
		<-done
		if len(at) != 2 || at[0] != 10*time.Second || at[1] != 20*time.Second {
			t.Fatalf("rounds at %v, want 10s and 20s (started at 35s, at once)", at)
		}
		if time.Since(start) != 35*time.Second {
			t.Fatalf("second round ran at %v, want 35s: at once after the long one", time.Since(start))
		}
	})
}
