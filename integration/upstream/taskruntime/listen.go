package taskruntime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// metaSubscriptionID tags every message of a subscriptions/listen stream.
const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// keepAlive is how often an idle listen stream gets an SSE comment, so
// that intermediaries do not close it.
const keepAlive = 15 * time.Second

// listen serves subscriptions/listen with the tasks extension's taskIds
// filter: the stream opens with notifications/subscriptions/acknowledged
// naming the task ids agreed to (this caller's existing tasks; others are
// left out, which leaks nothing), then carries notifications/tasks with the
// full DetailedTask, once at the start and on every change. When every
// agreed task is finished or gone it ends with the empty result. No other
// notification type is offered (the tool list never changes), so those
// filters are not acknowledged. Asking for taskIds without declaring the
// extension is 400 -32021, as the extension requires.
func (s *Server) listen(x *exchange) (any, *rpcError) {
	var p struct {
		Notifications map[string]json.RawMessage `json:"notifications"`
	}
	if json.Unmarshal(x.msg.Params, &p) != nil || p.Notifications == nil {
		return nil, inBandError(CodeInvalidParams, "subscriptions/listen requires params.notifications")
	}
	var ids []string
	if raw, ok := p.Notifications["taskIds"]; ok {
		if !x.meta.declaresTasks() {
			return nil, missingCapability(tasksCapability())
		}
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, inBandError(CodeInvalidParams, "notifications.taskIds must be a list of strings: %v", err)
		}
	}
	s.mu.Lock()
	agreed := []string{}
	for _, id := range ids {
		if t, ok := s.tasks[id]; ok && t.Owner == x.owner {
			agreed = append(agreed, id)
		}
	}
	s.mu.Unlock()

	x.answered = true
	sse := &sseWriter{w: x.w}
	subMeta := map[string]any{metaSubscriptionID: x.msg.ID}
	ack := map[string]any{"_meta": subMeta, "notifications": map[string]any{}}
	if _, ok := p.Notifications["taskIds"]; ok {
		ack["notifications"] = map[string]any{"taskIds": agreed}
	}
	sse.event(map[string]any{"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack})

	sent := map[string][]byte{}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var out []map[string]any
		s.mu.Lock()
		finished := len(agreed) > 0
		for _, id := range agreed {
			t, ok := s.tasks[id]
			if !ok {
				continue
			}
			if !t.Status.Terminal() {
				finished = false
			}
			d := t.detailed()
			delete(d, "resultType") // a notification's params, not a result
			b, err := json.Marshal(d)
			if err != nil || bytes.Equal(b, sent[id]) {
				continue
			}
			sent[id] = b
			d["_meta"] = subMeta
			out = append(out, d)
		}
		changed := s.changed
		s.mu.Unlock()
		for _, d := range out {
			sse.event(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks", "params": d})
		}
		if finished {
			sse.respond(x.msg.ID, map[string]any{"resultType": "complete", "_meta": subMeta}, nil)
			return nil, nil
		}
		select {
		case <-changed:
		case <-tick.C:
			sse.comment()
		case <-x.r.Context().Done(): // the client closed the stream
			return nil, nil
		case <-s.root.Done():
			return nil, nil
		}
	}
}

// comment writes an SSE comment line (a keep-alive).
func (s *sseWriter) comment() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return
	}
	fmt.Fprint(s.w, ":\n\n")
	s.flush()
}
