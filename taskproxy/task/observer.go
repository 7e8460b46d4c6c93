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
	// would watch more task ids than the principal may) or "bridge_input"
	// (too many bridged calls of the principal wait for input).
	Refused(reason string)
}
