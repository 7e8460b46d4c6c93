package runtime

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Hub wakes the gateway's own waiters (tasks/result streams, subscriptions)
// when a task changes. It lives beside the store and survives config
// reloads, so a waiter under a new config hears a worker under the old one.
// It carries no task data except progress: waiters re-read the store.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[*Subscription]struct{}
	// relay carries events to other processes sharing the store ([Hub.Relayed]).
	relay atomic.Pointer[task.EventRelay]
	// released receives a value when a task's lease was released
	// (task.EventReleased); those that come before it is taken coalesce.
	released chan struct{}
}

// Subscription receives the events of one task.
type Subscription struct {
	// Changed receives a value when the task record changed; changes that
	// arrive before the last was taken coalesce into one.
	Changed chan struct{}
	// Progress receives the params of upstream notifications/progress for
	// the task; when the receiver lags, newer ones are dropped.
	Progress chan json.RawMessage

	hub     *Hub
	taskIDs []string
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{subs: map[string]map[*Subscription]struct{}{}, released: make(chan struct{}, 1)}
}

// Released receives a value when a lease was released somewhere (an
// event of task.EventReleased), for the takeover pass.
func (h *Hub) Released() <-chan struct{} { return h.released }

// Subscribe starts receiving the events of the given tasks; call Close when
// done.
func (h *Hub) Subscribe(taskIDs ...string) *Subscription {
	s := &Subscription{
		Changed:  make(chan struct{}, 1),
		Progress: make(chan json.RawMessage, 32),
		hub:      h,
		taskIDs:  taskIDs,
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range taskIDs {
		if h.subs[id] == nil {
			h.subs[id] = map[*Subscription]struct{}{}
		}
		h.subs[id][s] = struct{}{}
	}
	return s
}

// Close stops the subscription.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, id := range s.taskIDs {
		delete(h.subs[id], s)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
	}
}

// Changed tells taskID's subscribers that its record changed.
func (h *Hub) Changed(taskID string) {
	h.Publish(context.Background(), task.TaskEvent{TaskID: taskID, Kind: task.EventChanged})
}

func (h *Hub) deliverChanged(taskID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[taskID] {
		select {
		case s.Changed <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// Progress hands taskID's subscribers an upstream progress notification.
func (h *Hub) Progress(taskID string, params json.RawMessage) {
	h.Publish(context.Background(), task.TaskEvent{TaskID: taskID, Kind: task.EventProgress, Params: params})
}

func (h *Hub) deliverProgress(taskID string, params json.RawMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[taskID] {
		select {
		case s.Progress <- params:
		default:
		}
	}
}
