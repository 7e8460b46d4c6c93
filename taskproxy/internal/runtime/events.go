package runtime

import (
	"context"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Publish delivers ev to this process's subscribers, then hands it to the
// relay, if any.
func (h *Hub) Publish(_ context.Context, ev task.TaskEvent) {
	h.Deliver(ev)
	if r := h.relay.Load(); r != nil {
		(*r).Send(ev)
	}
}

// Deliver wakes this process's subscribers of ev's task, without relaying
// it: for relays delivering what another process published.
func (h *Hub) Deliver(ev task.TaskEvent) {
	switch ev.Kind {
	case task.EventProgress:
		h.deliverProgress(ev.TaskID, ev.Params)
	case task.EventReleased:
		select {
		case h.released <- struct{}{}:
		default:
		}
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
func (h *Hub) setRelay(r task.EventRelay) {
	if r == nil {
		h.relay.Store(nil)
		return
	}
	h.relay.Store(&r)
}

// Relayed reports whether events cross to other processes.
func (h *Hub) Relayed() bool { return h.relay.Load() != nil }
