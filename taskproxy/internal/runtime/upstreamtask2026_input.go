package runtime

import (
	"fmt"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Input before the upstream's task. A 2026-07-28 upstream may answer a
// call that declares the tasks extension with an InputRequiredResult
// before it makes any task (it checks the call first, and makes its task
// only once the call comes again with the answers: the guard pattern). The
// gateway's task then waits in input_required as for any input: the
// requests are recorded as its own, under the gateway's keys (a
// 2025-11-25 client gets them on tasks/result, a 2026-07-28 one in the
// task's inputRequests), and once every one is answered the worker sends
// the call again with the answers as inputResponses and the upstream's
// requestState, round after round, until the upstream answers otherwise:
// with its task, which is followed from then on, or plainly, which ends
// the gateway's task with that answer.

// v2026TaskOf reads ev, the upstream's answer to the task's call, through
// any input rounds before the upstream's task: it returns that task, or
// false once the gateway's task has ended with the answer.
func (w *worker) v2026TaskOf(ev *upstream.Event) (follow.V2026Created, bool) {
	route, t, run := w.route, w.t, w.run
	for {
		switch {
		case ev.Err != nil:
			route.finishInterrupted(run.Ctx, t, ev.Err)
			return follow.V2026Created{}, false
		case ev.Final.Error != nil:
			route.Finish(t, nil, ev.Final.Error)
			return follow.V2026Created{}, false
		}
		created, ok := follow.ReadV2026Created(ev.Final.Result)
		if ok {
			return created, true
		}
		if !upstream.IsInputRequired(ev.Final.Result) {
			route.Finish(t, follow.V2026ResultFor(t, ev.Final.Result), nil) // the upstream ran it plainly
			return follow.V2026Created{}, false
		}
		keys, err := w.recordInput(ev.Final.Result)
		if err != nil {
			route.finishInterrupted(run.Ctx, t, err)
			return follow.V2026Created{}, false
		}
		a, err := w.retryWithAnswers(keys)
		if err != nil {
			route.finishInterrupted(run.Ctx, t, err)
			return follow.V2026Created{}, false
		}
		// The retry may be the call that makes the upstream's task.
		if ev, ok = run.readCreate(route, t, func() *upstream.Event { return follow.Events(run.Ctx, a, followed{w}) }); !ok {
			return follow.V2026Created{}, false
		}
	}
}

// retryWithAnswers waits for the client's answers to the input requests
// with keys (recordInput's, or the current round's after a restart) and
// starts the call's retry with them. The number of rounds is bounded by
// the inputs a task may record (MaxTaskInputs) and, for answers without
// input requests, by maxLoadShedRetries.
func (w *worker) retryWithAnswers(keys []string) (*upstream.Attempt, error) {
	params, err := w.awaitAnswers(keys)
	if err != nil {
		return nil, err
	}
	// From before the retry goes out: an ending of the task while it is
	// sent must let its answer be read (Run.readCreate), since it may make
	// the upstream's task.
	w.run.awaitCreate()
	a, err := w.nextAttempt(params, "")
	if err != nil {
		_ = w.run.createRead()
		return nil, fmt.Errorf("sending the call again with the answers: %w", err)
	}
	return a, nil
}

// waitsBeforeV2026Task reports whether t, without a call in flight or an
// upstream task's id, waits for input the upstream asked before making its
// task: the current round's requests are in the record (with the
// upstream's requestState), answered or not. Starting the retry moves the
// task to the next round, so a round with requests has not been sent yet.
func waitsBeforeV2026Task(t *task.Task) bool { return len(t.RoundInputs()) > 0 }
