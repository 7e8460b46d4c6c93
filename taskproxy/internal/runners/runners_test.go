package runners

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"
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

// handOver waits until an idle runner of p takes f, as run would hand it
// over, and reports whether one did within wait.
func handOver(p *runnerPool, f func(), wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case p.work <- f:
			return true
		default:
			time.Sleep(time.Millisecond)
		}
	}
	return false
}

// A runner that has done its work takes the next function on the same
// goroutine (with the stack it has grown), and ends once idle.
func TestRunnerPool(t *testing.T) {
	t.Parallel()
	p := &runnerPool{work: make(chan func()), idle: 200 * time.Millisecond}
	ids := make(chan uint64, 2)
	p.run(func() { ids <- goroutineID() })
	first := <-ids
	if !handOver(p, func() { ids <- goroutineID() }, 5*time.Second) {
		t.Fatal("no idle runner took the second function")
	}
	if second := <-ids; second != first {
		t.Errorf("second function ran on goroutine %d, want the runner %d", second, first)
	}
	// Idle past p.idle, the runner ends. (A runner that took the probe
	// starts its idle time again, so the test waits again before retrying.)
	for try := 0; ; try++ {
		time.Sleep(2 * p.idle)
		select {
		case p.work <- func() {}:
			if try == 10 {
				t.Fatal("a runner idle for longer than its idle time still takes work")
			}
			continue
		default:
		}
		break
	}
	// Busy runners do not hold work back: run starts another at once.
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	for range 3 {
		p.run(func() { started <- struct{}{}; <-release })
	}
	for range 3 {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatal("a function waited for a busy runner")
		}
	}
	close(release)
}
