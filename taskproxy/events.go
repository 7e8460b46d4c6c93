package taskproxy

import (
	"context"
	"encoding/json"
)

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
)

// TaskEvent is something that happened to a task.
type TaskEvent struct {
	TaskID string
	Kind   EventKind
	// Params are the params of a progress notification (EventProgress).
	Params json.RawMessage
}

// Events publishes task events and lets waiters subscribe to them. The Hub
// is the in-process implementation; with a relay attached it also carries
// them to and from the other processes sharing the store.
type Events interface {
	// Publish delivers ev to the subscribers of its task, at once, and
	// hands it to the relay if there is one. It never blocks on I/O.
	Publish(ctx context.Context, ev TaskEvent)
	// Subscribe starts receiving the events of the given tasks; the
	// subscription's Close ends it.
	Subscribe(taskIDs ...string) *Subscription
}

// EventRelay carries the events published in this process to the other
// processes sharing the store. It delivers theirs to the Hub it was
// opened on (Hub.Deliver), and should, for the tasks the Hub has subscribers
// for (Hub.Watched), notice changes it was not told of (by polling), so that
// a lost message only delays a wake-up.
type EventRelay interface {
	// Send hands ev to the other processes. It must not block: a relay
	// that cannot keep up may drop events.
	Send(ev TaskEvent)
	// Close stops the relay.
	Close() error
}

// EventSource is implemented by stores that several processes share (one
// database behind several gateway replicas). The runtime attaches the relay
// to its Hub when it opens the store, and also runs the cross-process duties:
// it watches its own workers' tasks for changes made elsewhere (a cancel)
// and periodically takes over tasks whose holder's lease expired.
type EventSource interface {
	// RelayEvents starts carrying events between hub and the other
	// processes sharing the store, until the relay is closed.
	RelayEvents(hub *Hub) (EventRelay, error)
}

// Publish delivers ev to this process's subscribers, then hands it to the
// relay, if any.
func (h *Hub) Publish(_ context.Context, ev TaskEvent) {
	h.Deliver(ev)
	if r := h.relay.Load(); r != nil {
		(*r).Send(ev)
	}
}

// Deliver wakes this process's subscribers of ev's task, without relaying
// it: for relays delivering what another process published.
func (h *Hub) Deliver(ev TaskEvent) {
	switch ev.Kind {
	case EventProgress:
		h.deliverProgress(ev.TaskID, ev.Params)
	default:
		h.deliverChanged(ev.TaskID)
	}
}

// Watched returns the ids of the tasks that have subscribers in this
// process, for relays that poll.
func (h *Hub) Watched() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.subs))
	for id := range h.subs {
		out = append(out, id)
	}
	return out
}

// setRelay attaches a relay (nil detaches it).
func (h *Hub) setRelay(r EventRelay) {
	if r == nil {
		h.relay.Store(nil)
		return
	}
	h.relay.Store(&r)
}

// relayed reports whether events cross to other processes.
func (h *Hub) relayed() bool { return h.relay.Load() != nil }

var _ Events = (*Hub)(nil)
