package upstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// ErrorHandler is an http.Handler that can also report the error its chain
// ended with, as Caddy's handlers do. The gateway uses it when the next
// handler offers it, so that a pass-through keeps Caddy's error handling and
// a worker learns why its upstream call failed.
type ErrorHandler interface {
	http.Handler
	ServeHTTPErr(w http.ResponseWriter, r *http.Request) error
}

// ServeNext calls next, returning its error when it can report one.
func ServeNext(next http.Handler, w http.ResponseWriter, r *http.Request) error {
	if eh, ok := next.(ErrorHandler); ok {
		return eh.ServeHTTPErr(w, r)
	}
	next.ServeHTTP(w, r)
	return nil
}

// ServeNextRecovering is ServeNext on a goroutine of the gateway's own: a
// handler that aborts, as reverse_proxy does with http.ErrAbortHandler when
// its reader goes away mid-stream, must end this call, not the process.
// The handler's error, or its panic, comes back as a NextError.
func ServeNextRecovering(next http.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel is panicked as is
				err = errAnswerAborted
				return
			}
			err = nextPanic(v)
		}
	}()
	return nextError(ServeNext(next, w, r))
}

// Response is the head of an answer from the next handler, with a
// body that streams while the handler is still writing it.
type Response struct {
	Status int
	Header http.Header
	Body   io.ReadCloser
}

// NewRequest builds a POST of body to the same endpoint as base,
// with base's headers (session, authorization and the like) and ctx. The
// client's Accept-Encoding is dropped: the gateway must read the answer.
func NewRequest(ctx context.Context, base *http.Request, body []byte) *http.Request {
	req := WithOwnValues(base.WithContext(ctx), base) // a deep copy: its headers are edited below
	req.Method = http.MethodPost
	SetBody(req, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Del("Content-Length")
	req.Header.Del("Accept-Encoding")
	req.Header.Del("Last-Event-ID")
	req.TransferEncoding = nil
	return req
}

// SetBody makes body, whole, the body of r, read from its start, with a
// GetBody that reads it again: two allocations (a ReplayBody and its
// GetBody), where a reader wrapped in io.NopCloser and a closure over body
// take three. A caller that allocates per request anyway holds a
// ReplayBody there and saves one (ReplayBody.Set).
func SetBody(r *http.Request, body []byte) {
	new(ReplayBody).Set(r, body)
}

// ReplayBody is a request body of bytes held in memory. Its zero value is
// ready for Set.
type ReplayBody struct {
	bytes.Reader
	data []byte
}

// Set makes body, whole, the body of r, read from its start, with a
// GetBody that reads it again, as SetBody does, in b: one allocation
// (GetBody, a method value). b must stay for as long as r may be read,
// and serve no other request.
func (b *ReplayBody) Set(r *http.Request, body []byte) {
	b.data = body
	b.Reset(body)
	r.Body, r.GetBody, r.ContentLength = b, b.again, int64(len(body))
}

// Close does nothing: the bytes stay for GetBody.
func (*ReplayBody) Close() error { return nil }

// again is GetBody: a new reader of the same bytes.
func (b *ReplayBody) again() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(b.data)), nil
}

// detachKey keys, in a task's run context, the configuration's Detach.
type detachKey struct{}

// WithDetach marks ctx so that every upstream request made on it gets
// writable request state of its own from detach.
func WithDetach(ctx context.Context, detach func(*http.Request) *http.Request) context.Context {
	return context.WithValue(ctx, detachKey{}, detach)
}

// maxResultKey keys, in a task's run context, the limit on one upstream
// message.
type maxResultKey struct{}

// MaxResultOf returns the limit on one upstream message of ctx's run.
func MaxResultOf(ctx context.Context) int64 {
	if n, ok := ctx.Value(maxResultKey{}).(int64); ok && n > 0 {
		return n
	}
	return DefaultMaxResultBytes
}

// WithMaxResult returns ctx carrying the limit on one upstream message of a
// run (n <= 0 means DefaultMaxResultBytes).
func WithMaxResult(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, maxResultKey{}, n)
}

// DefaultMaxResultBytes limits one upstream message when nothing else does:
// 8 MiB, far above what a tool result normally is, and small enough that a
// task record stays well within the stores' limits.
const DefaultMaxResultBytes = 8 << 20

// WithOwnValues gives req, an upstream request of a task, fresh copies of
// what handlers write to (Caddy's variables and replacer): one task makes
// several requests at once (its call, answers to the upstream's pings and
// requests, cancellations), and reverse_proxy writing to one shared
// variables map from two of them is a concurrent map write, which kills the
// process. Detach drops cancellation, so req's own is put back. The detach
// is found on req's context or on base's (a task's run). The request
// returned is a deep copy of req (Detach's contract): its headers may be
// edited.
func WithOwnValues(req, base *http.Request) *http.Request {
	ctx := req.Context()
	detach, ok := ctx.Value(detachKey{}).(func(*http.Request) *http.Request)
	if !ok { // a client's request (tasks/cancel) made with a task's base
		if detach, ok = base.Context().Value(detachKey{}).(func(*http.Request) *http.Request); !ok {
			return req.Clone(ctx)
		}
	}
	own := detach(req)
	owned, cancel := context.WithCancelCause(own.Context())
	v := &ownedCall{cancel: cancel}
	v.stop = context.AfterFunc(ctx, func() { cancel(endCause(ctx, v.answering.Load())) })
	return own.WithContext(context.WithValue(owned, ownedCallKey{}, v))
}

// ownedCall is what WithOwnValues keeps in an upstream request's own
// context, under ownedCallKey: one value, one allocation, for the two
// things the request's handler and Call read back.
type ownedCall struct {
	// answering is whether the next handler has written the answer's
	// head (set by Call's writer).
	answering atomic.Bool
	// stop and cancel free what WithOwnValues set up: Call releases them
	// once the handler returns (ReleaseRequest); otherwise they go when
	// the task's context ends.
	stop   func() bool
	cancel context.CancelCauseFunc
}

// release frees the request's context.
func (v *ownedCall) release() {
	v.stop()
	v.cancel(nil)
}

// endCause is the cause an upstream request's own context is cancelled
// with when the gateway ends the call (a cancelled task, a run_timeout, a
// shutdown). Before the answer's head it is ctx's: the round trip fails
// with it, and the caller reads it back from the request's context. Once
// the next handler streams the answer, the transport hands the cause to
// the body's reader, and reverse_proxy logs every read error there but a
// clean end as a warning ("aborting with incomplete response") and aborts
// the handler: for a call the gateway ended itself nothing failed, so the
// answer ends as io.EOF, and the gateway, which reads its own context,
// knows why it ended.
func endCause(ctx context.Context, answering bool) error {
	if answering {
		return io.EOF
	}
	return context.Cause(ctx)
}

// ownedCallKey keys an upstream request's ownedCall.
type ownedCallKey struct{}

// ReleaseRequest frees the context of an upstream request whose handler
// has returned: a task may make many (one per ping of the upstream), each
// otherwise registered on the task's context until the task ends.
func ReleaseRequest(req *http.Request) {
	if v, ok := req.Context().Value(ownedCallKey{}).(*ownedCall); ok {
		v.release()
	}
}

// Call sends req through next on a goroutine of runners and returns as
// soon as the answer's head is written; the body is read through a pipe.
// (An attempt, which holds its call for a task's whole run, decodes its
// answer on the handler's goroutine instead: answerWriter.) Cancelling req's context ends the
// call; closing the body stops reading it.
func Call(next http.Handler, req *http.Request) (*Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pipe: pw, head: make(chan struct{})}
	if v, ok := req.Context().Value(ownedCallKey{}).(*ownedCall); ok {
		w.answering = &v.answering
	}
	runners.Run(req.Context(), func() {
		defer ReleaseRequest(req)
		err := ServeNextRecovering(next, w, req)
		if err == nil && !w.wroteHeader() {
			err = errors.New("the next handler wrote no response")
		}
		w.finish(err)
	})
	select {
	case <-w.head:
	case <-req.Context().Done():
		select {
		case <-w.head:
			// Answered, and the handler already returned, which releases
			// (cancels) req's context: both are ready, the answer counts.
		default:
			_ = pr.CloseWithError(req.Context().Err())
			return nil, fmt.Errorf("calling upstream: %w", context.Cause(req.Context()))
		}
	}
	if w.err != nil && w.status == 0 {
		_ = pr.Close()
		return nil, fmt.Errorf("calling upstream: %w", w.err)
	}
	return &Response{Status: w.status, Header: w.sent, Body: pr}, nil
}

// pipeWriter is the http.ResponseWriter a worker hands to the next handler:
// the head is published once, the body streams through a pipe.
type pipeWriter struct {
	header http.Header
	pipe   *io.PipeWriter

	once   sync.Once
	head   chan struct{} // closed when status and sent (or err) are set
	status int
	sent   http.Header
	err    error
	// answering, when the request has one, is set with the head: the
	// request's context is then ended as a complete answer (endCause).
	answering *atomic.Bool
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if code < 200 { // informational answers such as 103 Early Hints
		return
	}
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		if w.answering != nil {
			w.answering.Store(true)
		}
		close(w.head)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pipe.Write(p)
}

// Flush is a no-op: the pipe hands each write over as it happens.
func (w *pipeWriter) Flush() {}

func (w *pipeWriter) wroteHeader() bool {
	select {
	case <-w.head:
		return true
	default:
		return false
	}
}

func (w *pipeWriter) finish(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.head)
	})
	if err != nil {
		_ = w.pipe.CloseWithError(err)
		return
	}
	_ = w.pipe.Close()
}

// FinishBody reads briefly what is left of an answer, so that the handler
// writing it ends cleanly instead of aborting mid-stream, then closes it.
func FinishBody(body io.ReadCloser, wait time.Duration) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<20))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(wait):
	}
	_ = body.Close()
}

// MediaType returns the lower-cased media type of a Content-Type value.
// The two types MCP sends, written plainly, as nearly every request and
// answer has them, are returned as they are: mime.ParseMediaType makes a
// map of the parameters, which every request paid for.
func MediaType(contentType string) string {
	switch contentType {
	case "application/json", "text/event-stream":
		return contentType
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	}
	return mt
}

const MaxJSONAnswer = 64 << 20

// ReadMessages decodes the JSON-RPC messages of an upstream answer, JSON or
// SSE, handing each to fn until fn returns done or an error, and keeps pos at
// the stream's last event id and retry delay. It returns io.EOF if the
// answer ended before fn was done.
func ReadMessages(resp *Response, pos *StreamPosition, limit int64, fn func(*jsonrpc.Message) (done bool, err error)) error {
	switch MediaType(resp.Header.Get("Content-Type")) {
	case "application/json":
		data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return fmt.Errorf("reading upstream answer: %w", err)
		}
		if int64(len(data)) > limit {
			// Counted, not kept, up to the most the gateway ever reads.
			rest, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, MaxJSONAnswer))
			return &TooLargeError{Size: int64(len(data)) + rest, Limit: limit}
		}
		msg, err := jsonrpc.Parse(data)
		if err != nil {
			return fmt.Errorf("upstream answer is not JSON-RPC: %w", err)
		}
		done, err := fn(msg)
		if err != nil || done {
			return err
		}
		return io.EOF
	case "text/event-stream":
		events := sse.NewLimitedReader(resp.Body, int(min(limit, sse.MaxEvent)))
		for {
			ev, err := events.Next()
			if err != nil {
				if tooLarge := (*sse.TooLargeError)(nil); errors.As(err, &tooLarge) {
					return &TooLargeError{Size: tooLarge.Size, Limit: tooLarge.Limit}
				}
				if errors.Is(err, io.ErrUnexpectedEOF) {
					return errors.New("upstream event stream broke off in the middle of an event")
				}
				return err
			}
			if ev.HasID {
				pos.LastID = ev.ID
			}
			if ms, err := strconv.Atoi(ev.Retry); err == nil && ms >= 0 {
				pos.Retry = min(time.Duration(ms)*time.Millisecond, 5*time.Second)
			}
			if !ev.HasData || strings.TrimSpace(ev.Data) == "" {
				continue // keep-alives and priming events
			}
			msg, err := jsonrpc.Parse(eventData(ev))
			if err != nil {
				return fmt.Errorf("upstream event is not JSON-RPC: %w", err)
			}
			if done, err := fn(msg); err != nil || done {
				return err
			}
		}
	default:
		return fmt.Errorf("upstream answered with unexpected content type %q", resp.Header.Get("Content-Type"))
	}
}

// eventData is the data of ev as bytes to parse, without copying it:
// every message of an event stream is parsed from one, and the string
// already is the decoder's copy, which nothing writes to again (an
// sse.Event's data is a string of its own). The bytes are read-only: the
// message parsed from them holds slices of them, which, as every
// message's raw parts, are only read (an edit makes a new slice,
// jsonx.Splice; an append copies, as the parts end at their capacity) and
// may be kept as long as the message is.
func eventData(ev *sse.Event) []byte {
	return unsafe.Slice(unsafe.StringData(ev.Data), len(ev.Data)) //nolint:gosec // read-only, as said above
}

// ReadAnswer reads resp, a 2xx answer, up to the response to id (to any
// response when id is nil), skipping the other messages of a stream, and
// returns it; with none, it returns nil and why reading stopped (io.EOF
// when the answer ended first, as ReadMessages says). The caller finishes
// the body.
func ReadAnswer(resp *Response, id json.RawMessage, limit int64) (*jsonrpc.Message, error) {
	var answer *jsonrpc.Message
	err := ReadMessages(resp, &StreamPosition{}, limit, func(m *jsonrpc.Message) (bool, error) {
		if m.IsResponse() && (id == nil || SameID(m.ID, id)) {
			answer = m
			return true, nil
		}
		return false, nil
	})
	if answer != nil {
		return answer, nil
	}
	return nil, err
}

// DescribeHTTPFailure turns a non-2xx upstream answer into a JSON-RPC error:
// the upstream's own error when its body carries one, else a summary.
func DescribeHTTPFailure(status int, data []byte) *jsonrpc.Error {
	if msg, err := jsonrpc.Parse(data); err == nil && msg.Error != nil {
		return msg.Error
	}
	text := strings.TrimSpace(string(data))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	e := jsonrpc.Errorf(jsonrpc.CodeInternalError, "upstream answered HTTP %d", status)
	if text != "" {
		e.Message += ": " + text
	}
	return e
}

// SameID reports whether two raw JSON-RPC ids are the same value.
func SameID(a, b json.RawMessage) bool {
	return bytes.Equal(bytes.TrimSpace(a), bytes.TrimSpace(b))
}

// TooLargeError is an upstream answer over the configured size limit.
type TooLargeError struct{ Size, Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("result too large (%d bytes, limit %d)", e.Size, e.Limit)
}

// Header names of the MCP Streamable HTTP transport.
const (
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderSessionID       = "Mcp-Session-Id"
)

// IsRoutingHeader reports whether the canonical header name k is one of
// the 2026-07-28 routing headers, which name the request they come with.
func IsRoutingHeader(k string) bool {
	return k == HeaderMethod || k == HeaderName || strings.HasPrefix(k, "Mcp-Param-")
}

// EncodeHeaderValue writes v as an MCP header value (Mcp-Name, Mcp-Param-*):
// as it is when it is visible ASCII without surrounding spaces, else in the
// =?base64?…?= form MCP uses for the rest (and for a value that would read
// as that form).
func EncodeHeaderValue(v string) string {
	plain := v == strings.TrimSpace(v) && !strings.HasPrefix(v, "=?base64?")
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] < 0x7f
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}
