package taskproxy

import "time"

// upstreamRunners runs the next handler for the gateway's own upstream
// calls (a task's call, its answers to the upstream, cancellations). A
// pass-through runs reverse_proxy on the connection's goroutine, whose
// stack has long grown to what reverse_proxy needs; a fresh goroutine per
// call would grow (copy) its stack on every call instead, several percent of
// a task's CPU. So a goroutine that has served a call waits a while for the
// next one. There is no bound: every call gets a goroutine at once, as it
// would with go; idle ones end after runnerIdle.
var upstreamRunners = runnerPool{work: make(chan func())}

// runnerIdle is how long an idle runner waits for more work before it ends.
const runnerIdle = 20 * time.Second

// runnerPool hands functions to idle goroutines, or starts one.
type runnerPool struct {
	work chan func() // unbuffered: a send succeeds only to a waiting runner
}

// run calls f on a goroutine of the pool.
func (p *runnerPool) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.serve(f)
	}
}

// serve calls f, then whatever run hands it, until it has waited runnerIdle
// without work.
func (p *runnerPool) serve(f func()) {
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(runnerIdle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		}
	}
}
