package runners

import (
	"context"
	"time"
)

// Pool runs the goroutines of tasks: their workers, the pumps of their
// upstream calls, and the next handler for the gateway's own upstream calls
// (a task's call, its answers to the upstream, cancellations). A
// pass-through runs reverse_proxy on the connection's goroutine, whose
// stack has long grown to what reverse_proxy needs; a fresh goroutine per
// call would grow (copy) its stack on every call instead, several percent of
// a task's CPU. So a goroutine that has done its work waits a while for the
// next. There is no bound: every function gets a goroutine at once, as it
// would with go; idle ones end after the pool's idle time.
type Pool struct {
	work chan func() // unbuffered: a send succeeds only to a waiting runner
	idle time.Duration
}

// NewPool returns a pool whose runners end once they have waited idle
// without work. The gateway shares one pool; a test whose time is a
// testing/synctest bubble's makes its own in the bubble (see [WithPool]),
// so that its idle runners wait on the bubble's channel and clock.
func NewPool(idle time.Duration) *Pool {
	return &Pool{work: make(chan func()), idle: idle}
}

// runnerIdle is how long an idle runner of the shared pool waits for more
// work before it ends.
const runnerIdle = 20 * time.Second

// shared is the pool of every call whose context names none.
var shared = NewPool(runnerIdle)

// poolKey keys the pool a context names.
type poolKey struct{}

// WithPool returns ctx naming p: [Run] with it, or with a context derived
// from it, runs on p instead of the shared pool.
func WithPool(ctx context.Context, p *Pool) context.Context {
	return context.WithValue(ctx, poolKey{}, p)
}

// Inherit returns ctx naming the pool from names, if it names one: for
// work a request leaves behind on a context of its own (a session ended
// in the background), which otherwise would run on the shared pool.
func Inherit(ctx, from context.Context) context.Context {
	if p, ok := from.Value(poolKey{}).(*Pool); ok {
		return WithPool(ctx, p)
	}
	return ctx
}

// Run calls f on a goroutine of the pool ctx names ([WithPool]), or of the
// shared pool.
func Run(ctx context.Context, f func()) {
	p, ok := ctx.Value(poolKey{}).(*Pool)
	if !ok {
		p = shared
	}
	p.Run(f)
}

// Run calls f on a goroutine of the pool.
func (p *Pool) Run(f func()) {
	select {
	case p.work <- f:
	default:
		go p.serve(f)
	}
}

// serve calls f, then whatever Run hands it, until it has waited p.idle
// without work.
func (p *Pool) serve(f func()) {
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
