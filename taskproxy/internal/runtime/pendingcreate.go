package runtime

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// An upstream that runs tasks itself (a 2026-07-28 one, or a 2025-11-25
// one sent params.task) may be slow to answer the tools/call that creates
// its task: the gateway's task exists (task_after passed, or the client
// asked for a task) while the upstream's id for its own is not known yet.
// Ending the gateway's task then (a cancel, its run_timeout, its expiry),
// or losing its lease to another replica (which cannot follow an upstream
// task whose id it never learned), must not close the call's stream at
// once: the upstream creates its task all the same and runs it untracked,
// since closing the stream cancels only the call, not a task (and on
// 2025-11-25 notifications/cancelled must not be used for a task, see
// stopUpstreamCall). So the worker keeps
// reading the answer, for at most follow.CreateGrace, and sends
// tasks/cancel, of the upstream's version, for the task it names.
// Meanwhile the task still counts against its owner's bound on active
// tasks (EndedStillUpstream), though its client already sees it ended, as
// its cancel asked.

// pendingCreate is the state of a run whose worker waits for the
// upstream's CreateTaskResult.
type pendingCreate struct {
	mu      sync.Mutex
	waiting bool  // the worker reads the creating call's answer
	ended   error // why the task ended while it did; nil while it has not
	timer   *time.Timer
	// counted is the worker table's count of such runs (workerTable.ended),
	// raised when ended is first set; nil for a run that is no worker's.
	counted *atomic.Int64
}

// awaitCreate marks the run as reading the upstream's CreateTaskResult.
func (run *Run) awaitCreate() {
	run.create.mu.Lock()
	run.create.waiting = true
	run.create.mu.Unlock()
}

// createRead ends the wait awaitCreate began; it returns why the task
// ended meanwhile (nil: it did not), and then the run is ended with it.
func (run *Run) createRead() error {
	run.create.mu.Lock()
	defer run.create.mu.Unlock()
	run.create.waiting = false
	if run.create.timer != nil {
		run.create.timer.Stop()
	}
	if cause := run.create.ended; cause != nil {
		run.Cancel(cause)
		return cause
	}
	return nil
}

// readCreate reads, with read, the answer to a call of t that may create
// the upstream's task (the first, or a retry with the answers to input
// asked before the task). When t ended meanwhile, the task the answer
// names is cancelled (cancelLateUpstreamTask) and ok is false.
func (run *Run) readCreate(route *Route, t *task.Task, read func() *upstream.Event) (ev *upstream.Event, ok bool) {
	run.awaitCreate()
	ev = read()
	if cause := run.createRead(); cause != nil {
		run.cancelLateUpstreamTask(route, t, ev, cause)
		return nil, false
	}
	return ev, true
}

// stop ends the run's upstream calls with cause, as Cancel does, unless
// the worker still reads the upstream's CreateTaskResult: then the call
// goes on for at most follow.CreateGrace, so that the task it names can be
// cancelled, and EndedStillUpstream counts the run until the worker is
// done.
func (run *Run) stop(cause error) {
	if !run.holdStop(cause) {
		run.Cancel(cause)
	}
}

// holdStop is stop's first half, for an ending recorded in between: when
// the worker reads the upstream's CreateTaskResult, it defers the stop
// (and the run counts in EndedStillUpstream from now on, before anyone can see the
// task ended) and returns true; otherwise the caller cancels the run.
func (run *Run) holdStop(cause error) bool {
	run.create.mu.Lock()
	defer run.create.mu.Unlock()
	if !run.create.waiting {
		return false
	}
	if run.create.ended == nil {
		run.create.ended = cause
		if run.create.counted != nil {
			run.create.counted.Add(1)
		}
		run.create.timer = time.AfterFunc(follow.CreateGrace, func() { run.Cancel(cause) })
	}
	return true
}

// endedStillUpstream reports whether the run's task ended while the worker still
// reads (or cancels) the upstream's task.
func (run *Run) endedStillUpstream() bool {
	run.create.mu.Lock()
	defer run.create.mu.Unlock()
	return run.create.ended != nil
}

// EndedStillUpstream counts the tasks of quota (task.Task.Quota) that
// ended while this process still reads the upstream's CreateTaskResult for
// them, or cancels the task it named: the upstream may run them yet, so
// they count as active against the quota's bound.
func (rt *Runtime) EndedStillUpstream(quota string) int {
	if rt.workers.ended.Load() <= 0 { // none: the usual case, without a walk of every worker
		return 0
	}
	n := 0
	for _, run := range rt.workers.snapshot() {
		if run.quota == quota && run.endedStillUpstream() {
			n++
		}
	}
	return n
}

// cancelLateUpstreamTask handles the answer to the creating call of t, a
// task of route that ended (cause) before it came: a CreateTaskResult names
// a task the upstream runs for nobody now, which is cancelled; without one
// (an error, a plain result, no answer within follow.CreateGrace) there is
// nothing to stop.
func (run *Run) cancelLateUpstreamTask(route *Route, t *task.Task, ev *upstream.Event, cause error) {
	if ev.Final == nil { // the grace passed, or the call failed
		route.log.Warn("the upstream did not answer the call of an ended task; a task it made for it is not cancelled",
			zap.String("task", t.ID), zap.Duration("grace", follow.CreateGrace), zap.NamedError("ended", cause), zap.Error(ev.Err))
		return
	}
	if ev.Final.Error != nil {
		return
	}
	id, ok := createdTaskID(t, ev.Final.Result)
	if !ok {
		return
	}
	run.setUpstreamTask(id)
	if ce := route.log.Check(zap.DebugLevel, "cancelling the upstream's task of an ended task"); ce != nil {
		ce.Write(zap.String("task", t.ID), zap.String("upstream_task", id), zap.Error(cause))
	}
	route.cancelUpstreamTask(run.Ctx, run, t, id)
}

// createdTaskID reads the upstream's task id from the answer to t's
// creating call, a CreateTaskResult of the upstream's version; false for
// any other answer.
func createdTaskID(t *task.Task, result json.RawMessage) (string, bool) {
	if t.UpstreamV2026 {
		created, ok := follow.ReadV2026Created(result)
		return created.TaskID, ok
	}
	created, ok := follow.ReadV2025Created(result)
	return created.TaskID, ok
}
