package runtime

import (
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What the observer is told besides creations and endings
// (task.RunObserver): why a task failed, read from its final record, and
// the tasks this process took over.

// interruptedMessages are the errors of tasks whose call's outcome is
// unknown.
var interruptedMessages = map[string]bool{
	MsgRestarted: true, MsgRouteGone: true,
	MsgReplicaLost: true, MsgReplicaRouteGone: true,
	MsgWorkerLost: true, MsgOutcomeLost: true,
	msgSessionLost: true, msgBridgeSessionLost: true,
}

// runTimeoutPrefix begins every RunTimeoutMessage.
var runTimeoutPrefix = RunTimeoutMessage(0)[:strings.IndexByte(RunTimeoutMessage(0), ':')+1]

// FailReason says why a failed task failed, from its stored error.
func FailReason(t *task.Task) task.FailReason {
	if t.Error == nil {
		return task.FailToolError // a result marked isError
	}
	msg := t.Error.Message
	switch {
	case interruptedMessages[msg]:
		return task.FailInterrupted
	case msg == rpcerr.ErrTaskExpired.Error():
		return task.FailExpired
	case strings.HasPrefix(msg, runTimeoutPrefix):
		return task.FailRunTimeout
	case rpcerr.IsUpstreamFailure(msg):
		return task.FailUpstreamUnreachable
	}
	return task.FailUpstreamError
}

// observeFailure tells obs why t failed, when it is a RunObserver.
func observeFailure(obs task.Observer, t *task.Task) {
	if o, ok := obs.(task.RunObserver); ok && t.Status == task.StatusFailed {
		o.TaskFailed(t.Era, FailReason(t))
	}
}

// observeTakeover tells the observer of t's route (or of the route in
// charge, when t's is not configured here) that this process took t over.
func observeTakeover(rt *Runtime, t *task.Task, cause task.TakeoverCause) {
	route := rt.RouteFor(t.Route)
	if route == nil {
		route = rt.routes.inCharge()
	}
	if route == nil {
		return
	}
	if o, ok := route.cfg.Observer.(task.RunObserver); ok {
		o.TakenOver(cause)
	}
}
