package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// run_timeout bounds how long a task's tool may run, apart from its ttl:
// an upstream that accepts a call and never answers would otherwise hold
// the task (and a slot of its owner's quota) working until the ttl ends.
// The clock runs while the task is working; time it spends in
// input_required, waiting for the client's answer, does not count, since
// that is the client's time, not the tool's. It starts when a worker
// starts the task in this process (again after a restart or a takeover).

// errRunTimeout is the cause a worker's context ends with when its
// run_timeout passes.
var errRunTimeout = errors.New("run timeout")

// RunTimeoutMessage is the error message of a task stopped by its
// run_timeout; it names the limit, so that an operator finds the setting.
func RunTimeoutMessage(limit time.Duration) string {
	return fmt.Sprintf("run timeout: the tool ran longer than %s (run_timeout)", limit)
}

// runTimeout is the limit of a task of tool: the tool's own, else the
// route's; 0 means none (the task's ttl bounds it).
func (cfg *RouteConfig) runTimeout(tool string) time.Duration {
	if d, ok := cfg.ToolRunTimeouts[tool]; ok {
		return d
	}
	return cfg.RunTimeout
}

// runTimer is the run_timeout of one task a worker runs: t as the worker
// started it, run its call, and call the worker's copy of what stopping
// the call needs.
type runTimer struct {
	route   *Route
	t, call *task.Task
	run     *Run
}

// arm starts the clock: when the tool has run for its limit, the task
// fails with a message naming it, and its upstream call is stopped as a
// cancellation stops it (notifications/cancelled on 2025-11-25,
// tasks/cancel for a task the upstream runs, the stream closed). The
// returned func stops the clock when the worker ends.
func (tm *runTimer) arm() (stop func()) {
	route, t, run := tm.route, tm.t, tm.run
	limit := route.cfg.runTimeout(t.Tool)
	if limit <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	// Subscribed before the goroutine starts, so that no status change
	// after StartWorker is missed.
	sub := route.rt.Hub.Subscribe(t.ID)
	go func() {
		defer sub.Close()
		c := newRunClock(limit, t.Status == task.StatusInputRequired, time.Now())
		timer := time.NewTimer(limit)
		defer timer.Stop()
		for {
			var expired <-chan time.Time
			if !c.paused {
				timer.Reset(c.left)
				expired = timer.C
			}
			select {
			case <-done:
				return
			case <-run.Ctx.Done():
				return
			case <-expired:
				tm.expire(limit)
				return
			case <-sub.Changed:
				timer.Stop()
				// A store that cannot be read keeps the clock as it was.
				ctx, cancel := context.WithTimeout(run.Ctx, 10*time.Second)
				rec, err := route.rt.Store.Get(ctx, t.Owner, t.ID)
				cancel()
				if err == nil && rec.Status.Terminal() {
					return
				}
				now := time.Now()
				if err == nil {
					c.set(rec.Status == task.StatusInputRequired, now)
				} else {
					c.set(c.paused, now)
				}
			}
		}
	}()
	return func() { close(done) }
}

// expire records the failure first (whatever the upstream answers to the
// cancellation arrives too late to count), then stops the call.
func (tm *runTimer) expire(limit time.Duration) {
	route, run, call := tm.route, tm.run, tm.call
	route.log.Info("task stopped by its run_timeout", zap.String("task", call.ID), zap.Duration("run_timeout", limit))
	held := run.holdStop(errRunTimeout) // counted as draining before the task shows failed
	route.Finish(call, nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", RunTimeoutMessage(limit)))
	if run.cancelling.CompareAndSwap(false, true) { // told once, as a cancel is
		route.stopUpstreamCall(run.Ctx, run, call, "run timeout")
	}
	if !held {
		run.Cancel(errRunTimeout)
	}
}

// runClock is the time a task's tool has left: it runs while the task is
// working and stands still while it waits for input.
type runClock struct {
	left   time.Duration
	paused bool
	since  time.Time // when it last started running
}

func newRunClock(limit time.Duration, paused bool, now time.Time) *runClock {
	return &runClock{left: limit, paused: paused, since: now}
}

// set pauses or resumes the clock at now; the time run since it last
// started is spent.
func (c *runClock) set(paused bool, now time.Time) {
	if !c.paused {
		c.left = max(c.left-now.Sub(c.since), 0)
	}
	c.paused, c.since = paused, now
}
