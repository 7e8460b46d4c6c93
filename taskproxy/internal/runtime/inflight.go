package runtime

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
)

// The gateway keeps two tables, never one: task
// routes live in the Store; this file holds the in-memory one of this
// process, the running workers. Plain calls need no table: they pass
// through with the client's own ids, so a client's notifications/cancelled
// reaches the upstream untouched.

// Run is a task whose upstream call runs in this process.
type Run struct {
	owner string
	// quota is whom the task counts against (task.Task.Quota).
	quota string
	// Ctx is what the task's upstream calls run on; cancel ends them.
	Ctx    context.Context
	Cancel context.CancelCauseFunc
	// Release frees the context's resources once the worker is done.
	Release func()
	// Base is the detached request the call was made from: its headers
	// (session, authorization) address the same upstream session when the
	// gateway must send the upstream a follow-up such as a cancellation.
	Base *http.Request
	Next http.Handler

	mu           sync.Mutex
	lastProgress json.RawMessage
	// cancelling is set by the first of the cancellations that stops the
	// call (a local tasks/cancel, one seen from another replica), so that
	// the upstream is told once.
	cancelling atomic.Bool
	// upstreamTaskID is the upstream's id of the task it runs for this
	// one ([worker.workUpstreamTask]), once known: what tasks/cancel names.
	upstreamTaskID string
	// create is the wait for the upstream's CreateTaskResult
	// ([Run.readCreate]).
	create pendingCreate
	// span is the run's mcp.task.run span (tracing.go), once started.
	span trace.Span
}

func (rt *Run) setUpstreamTask(id string) {
	rt.mu.Lock()
	rt.upstreamTaskID = id
	rt.mu.Unlock()
}

func (rt *Run) upstreamTask() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.upstreamTaskID
}

func (rt *Run) setProgress(p json.RawMessage) {
	rt.mu.Lock()
	rt.lastProgress = p
	rt.mu.Unlock()
}

func (rt *Run) Progress() json.RawMessage {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.lastProgress
}

// workerTable maps task ids to the workers running them in this process.
type workerTable struct {
	mu      sync.Mutex
	running map[string]*Run
	wg      sync.WaitGroup
	// ended counts the runs in the table whose task ended while the
	// worker still read the upstream's CreateTaskResult ([Run.readCreate]),
	// so that creates need not walk the table when there are none.
	ended atomic.Int64
}

func newWorkerTable() *workerTable { return &workerTable{running: map[string]*Run{}} }

func (wt *workerTable) add(id string, rt *Run) {
	wt.mu.Lock()
	wt.running[id] = rt
	wt.mu.Unlock()
}

func (wt *workerTable) remove(id string, rt *Run) {
	wt.mu.Lock()
	if wt.running[id] == rt {
		delete(wt.running, id)
		if rt != nil && rt.create.counted == &wt.ended && rt.endedStillUpstream() {
			wt.ended.Add(-1)
		}
	}
	wt.mu.Unlock()
}

func (wt *workerTable) get(id string) (*Run, bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	rt, ok := wt.running[id]
	return rt, ok
}

// snapshot copies the table.
func (wt *workerTable) snapshot() map[string]*Run {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	out := make(map[string]*Run, len(wt.running))
	maps.Copy(out, wt.running)
	return out
}

// count returns how many workers run now.
func (wt *workerTable) count() int {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return len(wt.running)
}

// Worker returns the run of task id, when a worker of this process runs it.
func (rt *Runtime) Worker(id string) (*Run, bool) { return rt.workers.get(id) }
