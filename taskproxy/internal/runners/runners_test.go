package runners

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// goroutineID is the id of the calling goroutine, from its stack header.
func goroutineID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(buf[:bytes.IndexByte(buf, ' ')]), 10, 64)
	return id
}

// handOver hands f to an idle runner of p, as run would, once every
// goroutine of the bubble waits, and reports whether one took it.
func handOver(p *Pool, f func()) bool {
	synctest.Wait()
	select {
	case p.work <- f:
		return true
	default:
		return false
	}
}

// A runner that has done its work takes the next function on the same
// goroutine (with the stack it has grown), and ends once idle.
func TestRunnerPool(t *testing.T) {
	t.Parallel()
	// The bubble's clock moves only when every goroutine in it waits: the
	// runners' idle timers fire on the fake clock, without waiting.
	synctest.Test(t, func(t *testing.T) {
		p := NewPool(runnerIdle)
		ids := make(chan uint64, 2)
		p.Run(func() { ids <- goroutineID() })
		first := <-ids
		if !handOver(p, func() { ids <- goroutineID() }) {
			t.Fatal("no idle runner took the second function")
		}
		if second := <-ids; second != first {
			t.Errorf("second function ran on goroutine %d, want the runner %d", second, first)
		}
		// Idle for just under p.idle, the runner still takes work (and
		// starts its idle time again); idle past it, the runner ends.
		time.Sleep(p.idle - time.Millisecond)
		if !handOver(p, func() {}) {
			t.Fatal("a runner idle for less than its idle time took no work")
		}
		time.Sleep(p.idle + time.Millisecond)
		if handOver(p, func() {}) {
			t.Fatal("a runner idle for longer than its idle time still takes work")
		}
		// Busy runners do not hold work back: run starts another at once.
		release := make(chan struct{})
		started := make(chan struct{}, 3)
		for range 3 {
			p.Run(func() { started <- struct{}{}; <-release })
		}
		synctest.Wait()
		if len(started) != 3 {
			t.Fatalf("%d of 3 functions started: a function waited for a busy runner", len(started))
		}
		close(release)
		time.Sleep(p.idle + time.Millisecond) // the runners end, as the bubble requires
	})
}

// Run runs f on the pool its context names, and work handed to that pool
// reaches the runner: a test's pool, made in its bubble, keeps the
// bubble's goroutines to itself.
func TestRunOnContextPool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := NewPool(runnerIdle)
		ctx := WithPool(context.Background(), p)
		ids := make(chan uint64, 2)
		Run(context.WithoutCancel(ctx), func() { ids <- goroutineID() })
		first := <-ids
		if !handOver(p, func() { ids <- goroutineID() }) {
			t.Fatal("the context's pool has no idle runner: Run ran f elsewhere")
		}
		if second := <-ids; second != first {
			t.Errorf("second function ran on goroutine %d, want the runner %d", second, first)
		}
		time.Sleep(p.idle + time.Millisecond) // the runner ends, as the bubble requires
	})
}

// Inherit names the pool of the context it inherits from, and leaves a
// context alone when that names none (the shared pool then stays).
func TestInherit(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		p := NewPool(runnerIdle)
		ids := make(chan uint64, 2)
		ctx := Inherit(context.Background(), WithPool(context.Background(), p))
		Run(ctx, func() { ids <- goroutineID() })
		first := <-ids
		if !handOver(p, func() { ids <- goroutineID() }) {
			t.Fatal("the inherited pool has no idle runner: Run ran f elsewhere")
		}
		if second := <-ids; second != first {
			t.Errorf("second function ran on goroutine %d, want the runner %d", second, first)
		}
		time.Sleep(p.idle + time.Millisecond) // the runner ends, as the bubble requires
	})
	ctx := context.Background()
	if got := Inherit(ctx, context.Background()); got != ctx {
		t.Errorf("Inherit from a context naming no pool returned %v, want ctx itself", got)
	}
}
