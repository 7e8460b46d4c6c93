package taskproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// An attempt is one upstream tools/call in flight. A pump goroutine sends
// the call through the next handler and turns its answer into events; whoever
// holds the attempt consumes them: the client's request while a 2026-07-28
// call may still finish before task_after, then the task's worker. The final
// event is the answer or the failure; after it the channel closes.
type attempt struct {
	events <-chan attemptEvent
}

// attemptEvent is one thing the upstream said, or the end of the call.
type attemptEvent struct {
	// notification is an upstream notification (progress, logging).
	notification *Message
	// request is a request the upstream sent during the call (2025-11-25
	// elicitation, sampling, roots, ping).
	request *Message
	// final is the upstream's response to the call: the last event.
	final *Message
	// err ends the call without a response: a transport failure, an HTTP
	// error without a JSON-RPC body, or a stream that ended early.
	err error
}

func (e attemptEvent) last() bool { return e.final != nil || e.err != nil }

// startAttempt sends body, a tools/call with upstreamID, through next on
// ctx. Cancelling ctx closes the upstream stream, which on 2026-07-28 is the
// cancellation of the call.
func startAttempt(ctx context.Context, base *http.Request, next http.Handler, upstreamID json.RawMessage, body []byte) *attempt {
	events := make(chan attemptEvent)
	send := func(ev attemptEvent) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer close(events)
		resp, err := callUpstream(next, newUpstreamRequest(ctx, base, body))
		if err != nil {
			send(attemptEvent{err: fmt.Errorf("calling the upstream: %w", err)})
			return
		}
		defer finishBody(resp.Body, 2*time.Second)
		if resp.Status < 200 || resp.Status > 299 {
			// An HTTP error with a JSON-RPC body is the upstream's answer.
			e := describeHTTPFailure(resp)
			send(attemptEvent{final: &Message{JSONRPC: "2.0", ID: upstreamID, Error: e}})
			return
		}
		answered := false
		err = readMessages(resp, func(m *Message) (bool, error) {
			switch {
			case m.IsResponse() && sameID(m.ID, upstreamID):
				answered = true
				send(attemptEvent{final: m})
				return true, nil
			case m.IsRequest():
				return !send(attemptEvent{request: m}), nil
			case m.IsNotification():
				return !send(attemptEvent{notification: m}), nil
			}
			return false, nil
		})
		if answered {
			return
		}
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("the upstream ended its answer without a response to the call")
		}
		send(attemptEvent{err: err})
	}()
	return &attempt{events: events}
}

// isInputRequired reports whether a result asks for input (2026-07-28
// multi-round-trip): the call must be retried with inputResponses.
func isInputRequired(result json.RawMessage) bool {
	rt, ok := getMember(result, "resultType")
	return ok && string(rt) == `"input_required"`
}
