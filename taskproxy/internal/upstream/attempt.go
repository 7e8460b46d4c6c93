package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// An attempt is one upstream tools/call in flight. A pump goroutine sends
// the call through the next handler, which writes the answer to a writer
// that turns it into events as it comes; whoever holds the attempt
// consumes them: the client's request while a 2026-07-28 call may still
// finish before task_after, then the task's worker. The final event is the
// answer or the failure; after it the channel closes.
type Attempt struct {
	Events <-chan Event
	// done is the attempt's context's: once it is closed no event comes
	// any more, whether or not the handler has returned yet.
	done  <-chan struct{}
	cause func() error
}

// Event is one thing the upstream said, or the end of the call.
type Event struct {
	// Notification is an upstream notification (progress, logging).
	Notification *jsonrpc.Message
	// Request is a request the upstream sent during the call (2025-11-25
	// elicitation, sampling, roots, ping).
	Request *jsonrpc.Message
	// Final is the upstream's response to the call: the last event.
	Final *jsonrpc.Message
	// Err ends the call without a response: a transport failure, an HTTP
	// error without a JSON-RPC body, or a stream that ended early.
	Err error
	// Head is the HTTP answer Final came in, for a pass-through to repeat.
	Head *Head
}

// Head is the HTTP status and headers of an upstream answer and,
// for a non-2xx one, its body (up to MaxHTTPFailureBody; nil if longer).
type Head struct {
	Status int
	Header http.Header
	Body   []byte
}

// MaxHTTPFailureBody bounds the body of a non-2xx upstream answer the
// gateway keeps to repeat.
const MaxHTTPFailureBody = 64 << 10

// Last reports whether e ends the call.
func (e Event) Last() bool { return e.Final != nil || e.Err != nil }

// Until reads a's events, handing each one before the last to on, until
// the last one or one that on keeps (on returns true): it returns that
// event and true. When the channel tick returns fires first it returns
// false, and the caller may call again; no event is lost. tick is asked
// again after each event, since on may arm a timer; a nil tick, or a nil
// channel, never fires. A channel closed without a last event, or the
// attempt's context ending (the pump sends nothing more then), reads as a
// last event with the cause of the context: of ctx, or of the attempt's
// when ctx has none. A nil on keeps nothing.
func (a *Attempt) Until(ctx context.Context, tick func() <-chan time.Time, on func(Event) bool) (Event, bool) {
	for {
		var fired <-chan time.Time
		if tick != nil {
			fired = tick()
		}
		select {
		case ev, ok := <-a.Events:
			if !ok {
				return Event{Err: a.endCause(ctx)}, true
			}
			if ev.Last() || (on != nil && on(ev)) {
				return ev, true
			}
		case <-a.done:
			return Event{Err: a.endCause(ctx)}, true
		case <-fired:
			return Event{}, false
		}
	}
}

// endCause is why the attempt ended without a last event.
func (a *Attempt) endCause(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil || a.cause == nil {
		return err
	}
	return a.cause()
}

// StartAttempt sends body, a tools/call with upstreamID, through next on
// ctx. Cancelling ctx closes the upstream stream, which on 2026-07-28 is the
// cancellation of the call.
func StartAttempt(ctx context.Context, base *http.Request, next http.Handler, upstreamID json.RawMessage, body []byte) *Attempt {
	events := make(chan Event)
	send := func(ev Event) bool {
		select {
		case events <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	runners.Run(ctx, func() {
		defer close(events)
		if err := pump(ctx, base, next, upstreamID, body, send); err != nil {
			send(Event{Err: err})
		}
	})
	return &Attempt{Events: events, done: ctx.Done(), cause: func() error { return context.Cause(ctx) }}
}

// pump runs the call through next on this goroutine, sending each event of
// its answer, and returns the error that ends it without a final event.
func pump(ctx context.Context, base *http.Request, next http.Handler, upstreamID json.RawMessage, body []byte, send func(Event) bool) error {
	var (
		pos      StreamPosition
		answered bool
		w        *answerWriter
	)
	handle := func(m *jsonrpc.Message) (bool, error) {
		switch {
		case m.IsResponse() && SameID(m.ID, upstreamID):
			answered = true
			send(Event{Final: m, Head: &Head{Status: w.status, Header: w.sent}})
			return true, nil
		case m.IsRequest():
			return !send(Event{Request: m}), nil
		case m.IsNotification():
			return !send(Event{Notification: m}), nil
		}
		return false, nil
	}
	calling := "calling the upstream"
	var (
		err        error
		handlerErr error
		broke      bool
		// spent counts the resumes since the stream last brought an
		// event the gateway had not seen (maxResumes bounds it): a long
		// call behind a proxy that cuts its stream now and then is
		// resumed as often as it makes progress, as the SDKs' clients
		// do, while a stream that brings nothing new ends.
		spent int
		// failures counts the resumes after a broken stream or a GET
		// that could not reach the upstream, since the last progress:
		// each waits longer (resumeDelay).
		failures int
	)
	for resumes := 0; ; resumes++ {
		seen := pos.LastID
		// Each request has a context of its own, which the drain ends
		// (answerWriter.stop) when the upstream holds an answer open that
		// is no longer read.
		reqCtx, endRequest := context.WithCancelCause(ctx)
		var req *http.Request
		if resumes == 0 {
			req = NewRequest(reqCtx, base, body)
		} else {
			req = newResumeRequest(reqCtx, base, pos.LastID)
		}
		w = newAnswerWriter(req, MaxResultOf(ctx), &pos, handle)
		w.endRequest = endRequest
		handlerErr = ServeNextRecovering(next, w, req)
		w.finish()
		ReleaseRequest(req) // which cancels req's context: the attempt's tells why the call ended
		endRequest(nil)     // after, which leaves ReleaseRequest's watch nothing to run
		if w.status == 0 {
			switch {
			case ctx.Err() != nil:
				handlerErr = context.Cause(ctx)
			case handlerErr == nil:
				handlerErr = errors.New("the next handler wrote no response")
			case resumes > 0 && spent < maxResumes && (Unreachable(handlerErr) || ConnectionLost(handlerErr)):
				// The upstream runs the call on: a GET that could not
				// reach it (a proxy in between restarts after it cut
				// the stream) is tried again, later, as a broken stream
				// is resumed.
				spent++
				failures++
				if err := waitToResume(ctx, resumeDelay(pos.Retry, failures)); err != nil {
					return err
				}
				continue
			}
			return fmt.Errorf("%s: calling upstream: %w", calling, handlerErr)
		}
		if w.kind == answerFailure {
			// An HTTP error with a JSON-RPC body is the upstream's answer.
			if ctx.Err() != nil {
				// Unless the call was cancelled (shutdown, lost lease,
				// cancelled or expired task) before it came: then it is
				// what the next handler made of the abort (a proxy
				// answers 502), and the task is the cancellation's to
				// settle, not failed with the 502.
				return fmt.Errorf("the upstream call was interrupted (HTTP %d): %w", w.status, context.Cause(ctx))
			}
			head := &Head{Status: w.status, Header: w.sent}
			if len(w.body) <= MaxHTTPFailureBody {
				head.Body = w.body
			}
			e := DescribeHTTPFailure(w.status, w.body)
			send(Event{Final: &jsonrpc.Message{JSONRPC: "2.0", ID: upstreamID, Error: e}, Head: head})
			return nil
		}
		err = w.end(handlerErr)
		if answered {
			return nil
		}
		if pos.LastID != seen { // progress: the budget and the backoff start over
			spent, failures = 0, 0
		}
		broke = w.brokeOff(handlerErr)
		ended := broke || err == nil || errors.Is(err, io.EOF)
		if !ended || !resumable(&pos, base) || spent == maxResumes || ctx.Err() != nil {
			break
		}
		spent++
		// A 2025-11-25 server may end a stream after an event with an
		// id and expect the client to resume it with GET and
		// Last-Event-ID, after the retry delay it gave; and a client
		// whose connection to the stream broke (a proxy in between cut
		// it, say) may resume it so, while the server runs the call on.
		delay := pos.Retry
		switch {
		case broke:
			failures++
			delay = resumeDelay(pos.Retry, failures)
		case resumes > 0:
			// A resume that ended cleanly is resumed again after at
			// least cleanResumeFloor, whatever retry it gave: an
			// upstream that ends each GET at once with a new event id
			// (progress, which renews the budget) would otherwise be
			// asked again at once, forever.
			delay = max(delay, cleanResumeFloor)
		}
		if err := waitToResume(ctx, delay); err != nil {
			return err
		}
		calling = "resuming the upstream stream"
	}
	switch {
	case ctx.Err() != nil:
		// The gateway ended the call: its stream ends cleanly then
		// (see endCause), and the reason is the cancellation's.
		return context.Cause(ctx)
	case broke:
		return fmt.Errorf("%w (%s): %w", ErrStreamBroke, whyNotResumed(&pos, base, spent), handlerErr)
	case err == nil || errors.Is(err, io.EOF):
		return errors.New("the upstream ended its answer without a response to the call")
	}
	return err
}

// brokeOff reports whether w's answer, an event stream, broke off on the
// upstream's side before the gateway stopped reading it: the next handler
// ended with a lost connection, or aborted the answer, which is how
// reverse_proxy ends one whose copy failed (errAnswerAborted). While the
// gateway reads (w.err is nil), w's writes never fail, so the copy failed
// in reading the upstream's body. A stream the gateway stopped reading
// (too large, malformed, answered, drained) did not break so; nor does a
// call the gateway ended, whose request ends as a complete answer
// (endCause), and which the caller tells by its context.
func (w *answerWriter) brokeOff(handlerErr error) bool {
	return w.kind == answerStream && w.err == nil && handlerErr != nil &&
		(errors.Is(handlerErr, errAnswerAborted) || ConnectionLost(handlerErr))
}

// whyNotResumed says why a stream that broke was not resumed (again), after
// resumes resumes that brought nothing new.
func whyNotResumed(pos *StreamPosition, base *http.Request, resumes int) string {
	switch {
	case base.Header.Get(HeaderSessionID) == "":
		return "a stream outside a 2025-11-25 session cannot be resumed"
	case pos.LastID == "":
		return "it gave no event id to resume it from"
	}
	return fmt.Sprintf("resumed %d times without a new event", resumes)
}

// maxResumes bounds how often one call's stream is resumed in a row
// without bringing a new event.
const maxResumes = 10

// cleanResumeFloor is the least wait before resuming a stream that a resume
// brought and that ended cleanly: about four GETs a second at most for a
// call whose upstream ends every stream at once, while a stream that lasted
// is barely delayed.
const cleanResumeFloor = 250 * time.Millisecond

// Resuming a stream that broke, or retrying a GET that could not reach the
// upstream, waits brokenResumeDelay, doubled at each such failure of the
// call up to maxBrokenResumeDelay, or the stream's retry if longer: what
// broke it (a proxy restarting, an upstream overloaded) is seldom over at
// once, and ten GETs at once would all fail in it.
const (
	brokenResumeDelay    = 500 * time.Millisecond
	maxBrokenResumeDelay = 5 * time.Second
)

// resumeDelay is the wait before the failures-th resume (from 1) after a
// broken stream or a failed GET, given the stream's retry.
func resumeDelay(retry time.Duration, failures int) time.Duration {
	return max(retry, min(brokenResumeDelay<<min(failures-1, 8), maxBrokenResumeDelay))
}

// waitToResume waits delay, or returns the cause of ctx once it ends.
func waitToResume(ctx context.Context, delay time.Duration) error {
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// StreamPosition is where an SSE answer stood: the id of its last event and
// the reconnection delay it asked for.
type StreamPosition struct {
	LastID string
	Retry  time.Duration
}

// resumable reports whether a stream that ended before the response to
// the call, cleanly or broken off by the upstream's side (brokeOff), can be
// resumed: it gave event ids, and the call runs in a 2025-11-25 session
// (resumption is a GET on the session).
func resumable(pos *StreamPosition, base *http.Request) bool {
	return pos.LastID != "" && base.Header.Get(HeaderSessionID) != ""
}

// newResumeRequest is the GET that resumes a session's stream after lastID.
func newResumeRequest(ctx context.Context, base *http.Request, lastID string) *http.Request {
	req := NewRequest(ctx, base, nil)
	req.Method, req.Body, req.GetBody, req.ContentLength = http.MethodGet, http.NoBody, nil, 0
	req.Header.Del("Content-Type")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	return req
}

// IsInputRequired reports whether a result asks for input (2026-07-28
// multi-round-trip): the call must be retried with inputResponses.
func IsInputRequired(result json.RawMessage) bool {
	rt, ok := jsonx.Get(result, "resultType")
	return ok && string(rt) == `"input_required"`
}

// SessionLost reports whether ev, the answer to a call made in a 2025-11-25
// session, is the upstream saying it no longer knows the session: HTTP 404
// to the call's own POST, as the transport specifies, or a 400 whose error
// names the session, as servers built on the TypeScript SDK v1 examples
// answer an id they do not hold.
func SessionLost(ev Event) bool {
	if ev.Final == nil || ev.Head == nil {
		return false
	}
	switch ev.Head.Status {
	case http.StatusNotFound:
		return true
	case http.StatusBadRequest:
		return ev.Final.Error != nil && strings.Contains(strings.ToLower(ev.Final.Error.Message), "session")
	}
	return false
}

// After is an Until tick that fires on ch.
func After(ch <-chan time.Time) func() <-chan time.Time {
	return func() <-chan time.Time { return ch }
}
