package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// answerWriter is the http.ResponseWriter an attempt hands to the next
// handler: it decodes the answer as the handler writes it, JSON or an event
// stream, and hands each message to on, on the handler's own goroutine. A
// call in flight is then one goroutine, where reading the answer through a
// pipe took a second one and a hand-over per write. It reads what
// ReadMessages reads, within the same limit.
type answerWriter struct {
	header http.Header
	limit  int64
	pos    *StreamPosition
	on     func(*jsonrpc.Message) (done bool, err error)
	// answering, when the request has one, is set with the head: the
	// request's context is then ended as a complete answer (endCause).
	answering *atomic.Bool

	status int // 0 until the head is written
	sent   http.Header
	kind   answerKind
	body   []byte // a JSON answer, or a failure's body, so far
	size   int64  // bytes of a JSON answer in all
	events *sse.Decoder

	// err stopped the reading: the answer was malformed or too large, or
	// on was done (errAnswered). The rest is drained (drain).
	err      error
	drained  int64
	drainEnd time.Time
	// endRequest ends the handler's request, as a complete answer, once
	// the drain is over (drainTimer): an upstream that holds the answer
	// open without writing would otherwise hold the call, and with it
	// the failure the attempt ends with, until the attempt's context
	// ends.
	endRequest context.CancelCauseFunc
	drainTimer *time.Timer
}

// answerKind is how an answer's body is read.
type answerKind uint8

const (
	answerJSON    answerKind = iota + 1 // one message, read at the end
	answerStream                        // text/event-stream, message by message
	answerFailure                       // a non-2xx answer: its body is kept, up to MaxHTTPFailureBody
	answerOther                         // an unexpected content type: err says so
)

var (
	// errAnswered stops the reading of an answer once on has what it
	// wanted.
	errAnswered = errors.New("the call was answered")
	// errFailureKept stops the reading of a non-2xx answer once as much of
	// it is kept as the gateway repeats.
	errFailureKept = errors.New("the failure's body is longer than the gateway keeps")
)

// Draining: once the reading stopped, what the handler still writes is
// dropped, up to drainBytes or for drainTime, so that it ends its answer
// cleanly instead of aborting it (as FinishBody does for a pipe); past
// that its writes fail, and after drainTime its request ends, which ends
// a handler that waits for an upstream gone silent.
const (
	drainBytes = 1 << 20
	drainTime  = 2 * time.Second
)

func newAnswerWriter(req *http.Request, limit int64, pos *StreamPosition, on func(*jsonrpc.Message) (bool, error)) *answerWriter {
	w := &answerWriter{header: http.Header{}, limit: limit, pos: pos, on: on}
	if v, ok := req.Context().Value(ownedCallKey{}).(*ownedCall); ok {
		w.answering = &v.answering
	}
	return w
}

func (w *answerWriter) Header() http.Header { return w.header }

func (w *answerWriter) WriteHeader(code int) {
	if code < 200 || w.status != 0 { // informational answers such as 103 Early Hints
		return
	}
	w.status, w.sent = code, w.header.Clone()
	if w.answering != nil {
		w.answering.Store(true)
	}
	contentType := w.sent.Get("Content-Type")
	switch mediaType := MediaType(contentType); {
	case code > 299:
		w.kind = answerFailure
	case mediaType == "application/json":
		w.kind = answerJSON
	case mediaType == "text/event-stream":
		w.kind = answerStream
		w.events = sse.NewDecoder(int(min(w.limit, sse.MaxEvent)))
	default:
		w.kind = answerOther
		w.stop(fmt.Errorf("upstream answered with unexpected content type %q", contentType))
	}
}

func (w *answerWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.err != nil {
		return w.drain(p)
	}
	switch w.kind {
	case answerJSON:
		w.size += int64(len(p))
		switch {
		case w.size <= w.limit:
			w.body = append(w.body, p...)
		case w.size > w.limit+MaxJSONAnswer:
			// Counted, not kept, up to the most the gateway ever reads.
			w.stop(&TooLargeError{Size: w.size, Limit: w.limit})
		default:
			w.body = nil
		}
	case answerFailure:
		keep := min(MaxHTTPFailureBody+1-len(w.body), len(p))
		w.body = append(w.body, p[:keep]...)
		if len(w.body) > MaxHTTPFailureBody {
			w.stop(errFailureKept)
		}
	case answerStream:
		if err := w.events.Write(p, w.event); err != nil {
			w.stop(streamError(err))
		} else if n := int64(w.events.Pending()); n > w.limit+MaxJSONAnswer {
			// An event past the limit is counted, not kept, up to the
			// most the gateway reads of a JSON answer: one that never
			// ends would otherwise keep the call until the task's
			// run_timeout or ttl.
			w.stop(&TooLargeError{Size: n, Limit: w.limit})
		}
	}
	return len(p), nil
}

// Flush does nothing: each write is decoded as it comes.
func (w *answerWriter) Flush() {}

// stop ends the reading with err; the rest of the answer is drained.
func (w *answerWriter) stop(err error) {
	w.err, w.drainEnd = err, time.Now().Add(drainTime)
	if w.endRequest != nil {
		end := w.endRequest
		// io.EOF: the gateway has read what it wanted, nothing failed
		// (endCause).
		w.drainTimer = time.AfterFunc(drainTime, func() { end(io.EOF) })
	}
}

// finish is called once the handler has returned: the drain's timer has
// nothing left to end.
func (w *answerWriter) finish() {
	if w.drainTimer != nil {
		w.drainTimer.Stop()
	}
}

// drain drops p while the drain lasts, then fails the write, which makes
// the handler give up the answer.
func (w *answerWriter) drain(p []byte) (int, error) {
	w.drained += int64(len(p))
	if w.drained > drainBytes || time.Now().After(w.drainEnd) {
		return 0, w.err
	}
	return len(p), nil
}

// event hands one event of a stream to on.
func (w *answerWriter) event(ev *sse.Event) error {
	if ev.HasID {
		w.pos.LastID = ev.ID
	}
	if ms, err := strconv.Atoi(ev.Retry); err == nil && ms >= 0 {
		w.pos.Retry = min(time.Duration(ms)*time.Millisecond, 5*time.Second)
	}
	if !ev.HasData || strings.TrimSpace(ev.Data) == "" {
		return nil // keep-alives and priming events
	}
	msg, err := jsonrpc.Parse(eventData(ev))
	if err != nil {
		return fmt.Errorf("upstream event is not JSON-RPC: %w", err)
	}
	switch done, err := w.on(msg); {
	case err != nil:
		return err
	case done:
		return errAnswered
	}
	return nil
}

// end is the end of the answer, once the handler returned with
// handlerErr: it reads what the answer holds still (a JSON answer is read
// here, whole) and returns why reading stopped, as ReadMessages does: nil
// when on was done, io.EOF when the answer ended first.
func (w *answerWriter) end(handlerErr error) error {
	if w.err == nil && handlerErr != nil {
		// The handler broke off the answer: what a reader of it gets.
		switch w.kind {
		case answerJSON:
			return fmt.Errorf("reading upstream answer: %w", handlerErr)
		case answerStream:
			return fmt.Errorf("reading event stream: %w", handlerErr)
		}
	}
	switch {
	case errors.Is(w.err, errAnswered):
		return nil
	case w.err != nil:
		return w.err
	}
	switch w.kind {
	case answerJSON:
		if w.size > w.limit {
			return &TooLargeError{Size: w.size, Limit: w.limit}
		}
		msg, err := jsonrpc.Parse(w.body)
		if err != nil {
			return fmt.Errorf("upstream answer is not JSON-RPC: %w", err)
		}
		done, err := w.on(msg)
		if err != nil || done {
			return err
		}
		return io.EOF
	case answerStream:
		err := w.events.End(w.event)
		switch {
		case errors.Is(err, errAnswered):
			return nil
		case errors.Is(err, io.EOF):
			return io.EOF
		}
		return streamError(err)
	}
	return nil
}

// streamError says what stopped the decoding of an event stream as
// ReadMessages says it.
func streamError(err error) error {
	if errors.Is(err, errAnswered) {
		return err
	}
	if tooLarge, ok := errors.AsType[*sse.TooLargeError](err); ok {
		return &TooLargeError{Size: tooLarge.Size, Limit: tooLarge.Limit}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("upstream event stream broke off in the middle of an event")
	}
	return err
}
