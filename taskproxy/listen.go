package taskproxy

import (
	"encoding/json"
	"time"
)

// subscriptions/listen with notifications.taskIds (2026-07-28): a
// long-lived event stream that first acknowledges the tasks the caller may
// watch, then carries notifications/tasks with the full DetailedTask on
// every change. Other filters (tools, resources) are the upstream's: a
// listen request without taskIds passes through, and one with both is
// acknowledged for its taskIds only.

// keepAliveInterval spaces SSE comments on idle streams, so proxies and
// clients do not time them out.
const keepAliveInterval = 15 * time.Second

// maxListenTasks bounds the tasks one subscription watches.
const maxListenTasks = 1000

// listenTaskIDs returns params.notifications.taskIds when present.
func listenTaskIDs(params json.RawMessage) ([]string, bool) {
	var p struct {
		Notifications struct {
			TaskIDs *[]string `json:"taskIds"`
		} `json:"notifications"`
	}
	if err := json.Unmarshal(orEmptyObject(params), &p); err != nil || p.Notifications.TaskIDs == nil {
		return nil, false
	}
	return *p.Notifications.TaskIDs, true
}

// listenedTask is what the stream last sent about a task.
type listenedTask struct {
	sent bool
	seen time.Time
	stat Status
}

func (c *call) serveListen(taskIDs []string) error {
	g, ctx := c.g, c.r.Context()
	// Ids the caller may not see are left out of the acknowledgement, just
	// like ids that do not exist.
	var watched []string
	last := map[string]*listenedTask{}
	for _, id := range taskIDs {
		if len(watched) == maxListenTasks {
			break // the acknowledgement says which ones are watched
		}
		if _, dup := last[id]; dup {
			continue
		}
		if _, err := g.rt.Store.Get(ctx, c.owner, id); err == nil {
			watched = append(watched, id)
			last[id] = &listenedTask{}
		}
	}
	sub := g.rt.Hub.Subscribe(watched...)
	defer sub.Close()

	release := c.openStream()
	if release == nil {
		return nil
	}
	defer release()
	subMeta := map[string]json.RawMessage{metaSubscriptionID: c.msg.ID}
	sse := StartSSE(c.w)
	ack, _ := RequestBytes(nil, "notifications/subscriptions/acknowledged", map[string]any{
		"_meta":         subMeta,
		"notifications": map[string]any{"taskIds": orEmpty(watched)},
	})
	if sse.WriteEvent("", ack) != nil {
		return nil
	}
	send := func() bool {
		for _, id := range watched {
			t, err := g.rt.Store.Get(ctx, c.owner, id)
			if err != nil {
				continue // expired meanwhile
			}
			l := last[id]
			if l.sent && l.seen.Equal(t.UpdatedAt) && l.stat == t.Status {
				continue
			}
			l.sent, l.seen, l.stat = true, t.UpdatedAt, t.Status
			params := toModernDetail(t, "")
			params.Meta = subMeta
			data, _ := RequestBytes(nil, "notifications/tasks", params)
			if sse.WriteEvent("", data) != nil {
				return false
			}
		}
		return true
	}
	keepAlive := time.NewTicker(keepAliveInterval)
	defer keepAlive.Stop()
	for {
		if !send() {
			return nil
		}
		select {
		case <-sub.Changed:
		case <-sub.Progress: // progress is not carried on task streams
		case <-keepAlive.C:
			if sse.WriteComment("keep-alive") != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		case <-g.cfg.Stopping:
			// A graceful end: the empty SubscriptionsListenResult.
			final, _ := ResponseBytes(c.msg.ID, map[string]any{"resultType": "complete", "_meta": subMeta})
			_ = sse.WriteEvent("", final)
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
