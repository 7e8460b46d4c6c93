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
}

func (c *call) serveListen(taskIDs []string) error {
	ctx := c.R.Context()
	// Ids the caller may not see are left out of the acknowledgement, just
	// like ids that do not exist.
	var watched []string
	last := map[string]*listenedTask{}
	for _, id := range taskIDs[:min(len(taskIDs), maxListenTasks)] {
		if _, dup := last[id]; dup {
			continue
		}
		if _, err := c.Runtime.Store.Get(ctx, c.Owner, id); err == nil {
			watched = append(watched, id)
			last[id] = &listenedTask{}
		}
	}
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
	send := func() bool {
		for _, id := range watched {
			t, err := c.Runtime.Store.Get(ctx, c.Owner, id)
			if err != nil {
				continue // expired meanwhile
			}
			l := last[id]
			if l.sent && l.seen.Equal(t.UpdatedAt) && l.stat == t.Status {
				continue
			}
			l.sent, l.seen, l.stat = true, t.UpdatedAt, t.Status
			params := Detail(t, "")
			params.Meta = subMeta
			data, _ := jsonrpc.RequestBytes(nil, "notifications/tasks", params)
			if stream.WriteEvent("", data) != nil {
				return false
			}
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
		case <-sub.Progress: // progress is not carried on task streams
		case <-keepAlive.C:
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
