package task

import "time"

// Observer is told of task lifecycle events, for metrics. Its methods must
// be cheap and safe for concurrent use.
type Observer interface {
	// TaskCreated counts a task stored.
	TaskCreated(era Era)
	// TaskEnded counts a task reaching status, age after its creation.
	TaskEnded(era Era, status Status, age time.Duration)
	// Refused counts a request refused for a limit: "quota" (too many
	// active tasks), "rate_limit", "streams", "watched_tasks" (a listen
	// would watch more task ids than the principal may), "bridge_input"
	// (too many bridged calls of the principal wait for input),
	// "inline_input" (too many of its plain calls wait for input on tasks
	// the upstream runs) or "draining" (a call that would become a task
	// on a process that stops).
	Refused(reason string)
}

// RunObserver is an Observer that is also told why tasks fail and which
// tasks this process took over. It is a separate interface so that an
// Observer need not implement it; the runtime asks for it with a type
// assertion. Its methods must be cheap and safe for concurrent use.
type RunObserver interface {
	// TaskFailed counts a task that reached StatusFailed, by why it
	// failed; TaskEnded counts it too.
	TaskFailed(era Era, reason FailReason)
	// TakenOver counts a task whose worker is gone that this process
	// claimed, to run it again, follow it, or fail it.
	TakenOver(cause TakeoverCause)
}

// FailReason says why a task failed, in a small closed set (metric labels
// must stay bounded).
type FailReason string

// The reasons a task fails.
const (
	// FailToolError: the tool answered with a result marked isError
	// (a 2025-11-25 task fails with it).
	FailToolError FailReason = "tool_error"
	// FailUpstreamError: the upstream answered with a JSON-RPC error, or
	// its answer was not one the gateway could use.
	FailUpstreamError FailReason = "upstream_error"
	// FailUpstreamUnreachable: the upstream could not be reached, or the
	// connection to it was lost before its answer.
	FailUpstreamUnreachable FailReason = "upstream_unreachable"
	// FailRunTimeout: the tool ran longer than its run_timeout.
	FailRunTimeout FailReason = "run_timeout"
	// FailExpired: the task's ttl ended before its call did.
	FailExpired FailReason = "expired"
	// FailInterrupted: the call's outcome is unknown: the gateway (or
	// the replica running it) restarted, its worker or its upstream
	// session was lost, or its outcome could not be stored.
	FailInterrupted FailReason = "interrupted"
)

// FailReasons lists every FailReason, for metrics that start at zero.
var FailReasons = []FailReason{FailToolError, FailUpstreamError, FailUpstreamUnreachable, FailRunTimeout, FailExpired, FailInterrupted}

// TakeoverCause says whose task this process took over.
type TakeoverCause string

// The causes of a takeover.
const (
	// TakeoverRestart: a task left running by this gateway's previous
	// process (or by any process, when the store was found with orphans
	// at the start).
	TakeoverRestart TakeoverCause = "restart"
	// TakeoverReplica: a task of another replica whose lease expired
	// (the replica stopped or lost the store).
	TakeoverReplica TakeoverCause = "replica"
)

// TakeoverCauses lists every TakeoverCause, for metrics that start at
// zero.
var TakeoverCauses = []TakeoverCause{TakeoverRestart, TakeoverReplica}
