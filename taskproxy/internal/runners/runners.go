package runners

import "time"

// pool runs the goroutines of tasks: their workers, the pumps of their
// upstream calls, and the next handler for the gateway's own upstream calls
// (a task's call, its answers to the upstream, cancellations). A
// pass-through runs reverse_proxy on the connection's goroutine, whose
// stack has long grown to what reverse_proxy needs; a fresh goroutine per
// call would grow (copy) its stack on every call instead, several percent of
// a task's CPU. So a goroutine that has done its work waits a while for the
// next. There is no bound: every function gets a goroutine at once, as it
// would with go; idle ones end after runnerIdle.
var pool = runnerPool{work: make(chan func()), idle: runnerIdle}

// Run calls f on a goroutine of the pool.
func Run(f func()) { pool.run(f) }

// runnerIdle is how long an idle runner waits for more work before it ends.
const runnerIdle = 20 * time.Second

// runnerPool hands functions to idle goroutines, or starts one.
type runnerPool struct {
	work chan func() // unbuffered: a send succeeds only to a waiting runner
	idle time.Duration
}

// run calls f on a goroutine of the pool.
func (p *runnerPool) run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.serve(f)
	}
}

// serve calls f, then whatever run hands it, until it has waited p.idle
// without work.
func (p *runnerPool) serve(f func()) {
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		}
	}
}
