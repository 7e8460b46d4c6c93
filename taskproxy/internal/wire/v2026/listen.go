package v2026

import (
	"encoding/json"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// subscriptions/listen with notifications.taskIds (2026-07-28): a
// long-lived event stream that first acknowledges the tasks the caller may
// watch, then carries notifications/tasks with the full DetailedTask on
// every change. Other filters (tools, resources) are the upstream's: a
// listen request without taskIds passes through, and one with both is
// acknowledged for its taskIds only.

// maxListenTasks bounds the tasks one subscription watches.
const maxListenTasks = 1000

// ListenTaskIDs returns params.notifications.taskIds when present, without
// repeats. A list longer than maxListenTasks is refused with -32602 before it
// is decoded, let alone looked up: ids are cheap to send and each costs a
// store lookup.
func ListenTaskIDs(params json.RawMessage) ([]string, bool, *jsonrpc.Error) {
	notifications, ok := jsonx.Get(jsonx.OrEmptyObject(params), "notifications")
	if !ok {
		return nil, false, nil
	}
	raw, ok := jsonx.Get(notifications, "taskIds")
	if !ok || string(raw) == "null" {
		return nil, false, nil
	}
	if n, err := jsonx.CountElements(raw, maxListenTasks); err == nil && n > maxListenTasks {
		return nil, true, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: notifications.taskIds lists more than %d task ids (limit %d per subscription)", maxListenTasks, maxListenTasks)
	}
	var ids []string
	if err := json.Unmarshal(raw, &ids); err != nil {
		return nil, false, nil // not a list of ids: the upstream's to judge
	}
	return dedupe(ids), true, nil
}

// dedupe drops repeated strings, keeping the first of each in order.
func dedupe(ids []string) []string {
	seen := make(map[string]struct{}, len(ids))
	out := ids[:0]
	for _, id := range ids {
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			out = append(out, id)
		}
	}
	return out
}

// listenedTask is what the stream last sent about a task.
type listenedTask struct {
	sent bool
	seen time.Time
	stat task.Status
	msg  string
	at   time.Time // when it was sent
}

// listenStatusInterval spaces the notifications of one task on one stream
// whose status stays the same (its status message moved: progress, or an
// upstream's message): the latest state goes out at most this often. A new
// status goes out at once.
const listenStatusInterval = time.Second

// pace decides what to do about a watched task whose summary is sum at
// now: send it, or nothing (unchanged), or nothing until holdUntil (its
// status is the one last sent, and that went out less than
// listenStatusInterval ago).
func (l *listenedTask) pace(sum *task.Task, now time.Time) (send bool, holdUntil time.Time) {
	switch {
	case !l.sent:
		return true, time.Time{}
	case l.seen.Equal(sum.UpdatedAt) && l.stat == sum.Status && l.msg == sum.StatusMessage:
		return false, time.Time{}
	case l.stat == sum.Status && now.Sub(l.at) < listenStatusInterval:
		return false, l.at.Add(listenStatusInterval)
	}
	return true, time.Time{}
}

// fromSummary reports whether the DetailedTask of a task in status is all
// in its summary: nothing is inlined while it works or once cancelled.
func fromSummary(status task.Status) bool {
	return status == task.StatusWorking || status == task.StatusCancelled
}

// A stream reads the summaries of the tasks it watches when it wakes (a
// watched task changed, the keep-alive, a held-back notification falls
// due), and a task's record, its arguments and result, only when its
// summary moved and its DetailedTask inlines more than the summary has.
// Progress does not wake it: a progress notification is not carried on task
// streams, and the status message progress writes is a change of the task.
func (c *call) serveListen(taskIDs []string) error {
	ctx := c.R.Context()
	store := c.Runtime.Store
	// Ids the caller may not see are left out of the acknowledgement, just
	// like ids that do not exist.
	var watched []string
	last := map[string]*listenedTask{}
	for _, id := range taskIDs[:min(len(taskIDs), maxListenTasks)] {
		if _, dup := last[id]; dup {
			continue
		}
		if _, err := task.GetSummary(ctx, store, c.Owner, id); err == nil {
			watched = append(watched, id)
			last[id] = &listenedTask{}
		}
	}
	unwatch := c.WatchTasks(len(watched))
	if unwatch == nil {
		return nil
	}
	defer unwatch()
	sub := c.Runtime.Hub.Subscribe(watched...)
	defer sub.Close()

	release := c.OpenStream()
	if release == nil {
		return nil
	}
	defer release()
	subMeta := map[string]json.RawMessage{metaSubscriptionID: c.Msg.ID}
	stream := sse.Start(c.W, 0)
	ack, _ := jsonrpc.RequestBytes(nil, "notifications/subscriptions/acknowledged", map[string]any{
		"_meta":         subMeta,
		"notifications": map[string]any{"taskIds": orEmpty(watched)},
	})
	if stream.WriteEvent("", ack) != nil {
		return nil
	}
	held := time.NewTimer(time.Hour)
	held.Stop()
	defer held.Stop()
	// send notifies the watched tasks whose summary moved since last sent,
	// and arms held for the earliest one it held back.
	send := func() bool {
		now := time.Now()
		var due time.Time
		for _, id := range watched {
			t, err := task.GetSummary(ctx, store, c.Owner, id)
			if err != nil {
				continue // expired meanwhile
			}
			l := last[id]
			if send, hold := l.pace(t, now); !send {
				if !hold.IsZero() && (due.IsZero() || hold.Before(due)) {
					due = hold
				}
				continue
			}
			if !fromSummary(t.Status) {
				if t, err = store.Get(ctx, c.Owner, id); err != nil {
					continue
				}
			}
			l.sent, l.seen, l.stat, l.msg, l.at = true, t.UpdatedAt, t.Status, t.StatusMessage, now
			params := Detail(t, "")
			params.Meta = subMeta
			data, _ := jsonrpc.RequestBytes(nil, "notifications/tasks", params)
			if stream.WriteEvent("", data) != nil {
				return false
			}
		}
		if !due.IsZero() {
			held.Reset(time.Until(due))
		}
		return true
	}
	keepAlive := time.NewTicker(wire.KeepAliveInterval)
	defer keepAlive.Stop()
	for {
		if !send() {
			return nil
		}
		select {
		case <-sub.Changed:
		case <-held.C:
		case <-keepAlive.C:
			// The summaries are read again after a keep-alive: a change
			// whose wake-up was lost (another replica's, on a relay that
			// dropped it) shows within one interval.
			if stream.WriteComment("keep-alive") != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		case <-c.Stopping:
			// A graceful end: the empty SubscriptionsListenResult.
			final, _ := jsonrpc.ResponseBytes(c.Msg.ID, map[string]any{"resultType": "complete", "_meta": subMeta})
			_ = stream.WriteEvent("", final)
			return nil
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
