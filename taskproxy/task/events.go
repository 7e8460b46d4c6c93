package task

import "encoding/json"

// Task events. A task's worker runs in the process that accepted the call,
// while cancellations, input answers, tasks/result waiters and subscriptions
// may be served by any process sharing the store. Events say only which
// task changed and how (never its data, except progress): a receiver re-reads
// the task from the store. The Hub delivers them within the process at once;
// a store shared by several processes may carry them to the others as well
// (EventSource), in addition, never instead.

// EventKind says what happened to a task.
type EventKind string

// The event kinds.
const (
	// EventChanged: the task's record changed (status, inputs, answers,
	// outcome, cancellation); receivers re-read it.
	EventChanged EventKind = "changed"
	// EventProgress: the upstream reported progress for the task; Params
	// are the notification's params. Relays may drop progress whose params
	// are too large to carry between processes.
	EventProgress EventKind = "progress"
	// EventReleased: a process that stops released the task's lease while
	// the task still runs; the processes that take over tasks look for it
	// at once rather than at their next pass. Its subscribers are not
	// woken: the record is unchanged.
	EventReleased EventKind = "released"
)

// TaskEvent is something that happened to a task.
type TaskEvent struct {
	TaskID string
	Kind   EventKind
	// Params are the params of a progress notification (EventProgress).
	Params json.RawMessage
}

// EventRelay carries the events published in this process to the other
// processes sharing the store. It delivers theirs to the Hub it was
// opened on (EventSink.Deliver), and should, for the tasks the sink has
// subscribers for (EventSink.Watched), notice changes it was not told of (by
// polling), so that a lost message only delays a wake-up.
type EventRelay interface {
	// Send hands ev to the other processes. It must not block: a relay
	// that cannot keep up may drop events.
	Send(ev TaskEvent)
	// Close stops the relay.
	Close() error
}

// EventSource is implemented by stores that several processes share (one
// database behind several gateway replicas). The runtime attaches the relay
// to its event hub when it opens the store, and also runs the cross-process duties:
// it watches its own workers' tasks for changes made elsewhere (a cancel)
// and periodically takes over tasks whose holder's lease expired.
type EventSource interface {
	// RelayEvents starts carrying events between sink and the other
	// processes sharing the store, until the relay is closed.
	RelayEvents(sink EventSink) (EventRelay, error)
}

// EventSink is where a relay delivers the events other processes published:
// the runtime's in-process hub.
type EventSink interface {
	// Deliver wakes this process's subscribers of ev's task, without
	// relaying it.
	Deliver(ev TaskEvent)
	// Watched returns the ids of the tasks that have subscribers in this
	// process, for relays that poll.
	Watched() []string
}
