package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
)

// pieces is a handler that answers with status and content type, writing
// the body in the given pieces, flushing after each.
func pieces(status int, contentType string, body ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		for _, p := range body {
			_, _ = w.Write([]byte(p))
			w.(http.Flusher).Flush()
		}
	}
}

// failing is a next handler that fails, as reverse_proxy does when it
// cannot reach the upstream, without writing an answer.
type failing struct{ err error }

func (f failing) ServeHTTP(http.ResponseWriter, *http.Request) {}

func (f failing) ServeHTTPErr(http.ResponseWriter, *http.Request) error { return f.err }

// attemptEvents runs a call through next and returns every event up to
// the last one.
func attemptEvents(t *testing.T, ctx context.Context, next http.Handler) []Event {
	t.Helper()
	// As in a task's run: each upstream request gets a context of its own,
	// which is cancelled once its handler returns.
	ctx = WithDetach(ctx, func(r *http.Request) *http.Request { return r.Clone(r.Context()) })
	base := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/mcp", http.NoBody)
	a := StartAttempt(ctx, base, next, json.RawMessage(`7`), []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}`))
	var out []Event
	ev, _ := a.Until(ctx, nil, func(ev Event) bool { out = append(out, ev); return false })
	return append(out, ev)
}

// describe is an event as the tests compare it.
func describe(ev Event) string {
	switch {
	case ev.Notification != nil:
		return "notification " + ev.Notification.Method
	case ev.Request != nil:
		return "request " + ev.Request.Method
	case ev.Final != nil && ev.Final.Error != nil:
		return fmt.Sprintf("error %d %s (HTTP %d, body %d bytes)", ev.Final.Error.Code, ev.Final.Error.Message, ev.Head.Status, len(ev.Head.Body))
	case ev.Final != nil:
		return fmt.Sprintf("final %s (HTTP %d)", ev.Final.Result, ev.Head.Status)
	case ev.Err != nil && IsNextError(ev.Err):
		return "failed: " + ev.Err.Error() + " (the next handler's error)"
	case ev.Err != nil:
		return "failed: " + ev.Err.Error()
	}
	return "nothing"
}

// The answer is read as the handler writes it, in whatever pieces, JSON or
// an event stream, within the limit of one message, and ends the attempt
// as reading it through a pipe did.
func TestAttemptReadsAnswerAsWritten(t *testing.T) {
	t.Parallel()
	const limit = 1000
	final := `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	ping := `{"jsonrpc":"2.0","id":"s1","method":"ping"}`
	big := `{"jsonrpc":"2.0","id":7,"result":{"text":"` + strings.Repeat("x", 3000) + `"}}`
	tests := []struct {
		name string
		next http.Handler
		want []string
	}{
		{"JSON in pieces", pieces(200, "application/json", final[:10], final[10:30], final[30:]),
			[]string{`final {"content":[]} (HTTP 200)`}},
		{"JSON with parameters", pieces(200, "application/json; charset=utf-8", final),
			[]string{`final {"content":[]} (HTTP 200)`}},
		{"stream cut anywhere", pieces(200, "text/event-stream", "data: "+note[:20], note[20:]+"\n", "\ndata: "+ping+"\n\nid: 3\r", "\ndata: "+final+"\r\n", "\r\n"),
			[]string{"notification notifications/progress", "request ping", `final {"content":[]} (HTTP 200)`}},
		{"stream, another call's answer skipped", pieces(200, "text/event-stream", `data: {"jsonrpc":"2.0","id":8,"result":{}}`+"\n\n", "data: "+final+"\n\n"),
			[]string{`final {"content":[]} (HTTP 200)`}},
		{"JSON over the limit", pieces(200, "application/json", big[:2000], big[2000:]),
			[]string{fmt.Sprintf("failed: result too large (%d bytes, limit %d)", len(big), limit)}},
		{"event over the limit", pieces(200, "text/event-stream", "data: "+big[:500], big[500:]+"\n\n"),
			[]string{fmt.Sprintf("failed: result too large (%d bytes, limit %d)", len("data: "+big)+2, limit)}},
		{"unexpected content type", pieces(200, "text/html", "<html>"),
			[]string{`failed: upstream answered with unexpected content type "text/html"`}},
		{"HTTP failure with a JSON-RPC body", pieces(400, "application/json", `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no such tool"}}`),
			[]string{"error -32602 no such tool (HTTP 400, body 73 bytes)"}},
		{"HTTP failure with a body longer than kept", pieces(502, "text/plain", strings.Repeat("b", MaxHTTPFailureBody), "more"),
			[]string{"error -32603 upstream answered HTTP 502: bbb"}},
		{"no response", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
			[]string{"failed: calling the upstream: calling upstream: the next handler wrote no response"}},
		{"handler failed before the head", failing{errors.New("dial tcp: connection refused")},
			[]string{"failed: calling the upstream: calling upstream: dial tcp: connection refused (the next handler's error)"}},
		{"stream without the answer", pieces(200, "text/event-stream", "data: "+note+"\n\n"),
			[]string{"notification notifications/progress", "failed: the upstream ended its answer without a response to the call"}},
		{"stream broken off in an event", pieces(200, "text/event-stream", "data: "+final),
			[]string{"failed: upstream event stream broke off in the middle of an event"}},
		{"event not JSON-RPC", pieces(200, "text/event-stream", "data: {\n\n"),
			[]string{"failed: upstream event is not JSON-RPC: "}},
		{"answer aborted", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(final[:10]))
			panic(http.ErrAbortHandler)
		}), []string{"failed: reading upstream answer: the upstream answer was aborted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := WithMaxResult(t.Context(), limit)
			var got []string
			for _, ev := range attemptEvents(t, ctx, tt.next) {
				got = append(got, describe(ev))
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("event %d: %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// What the handler writes after the answer is dropped, so that it ends its
// answer cleanly, up to a bound past which its writes fail, so that an
// upstream that goes on streaming does not hold the call.
func TestAttemptDrainsAfterAnswer(t *testing.T) {
	t.Parallel()
	final := `{"jsonrpc":"2.0","id":7,"result":{}}`
	failed := make(chan int64, 1)
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: " + final + "\n\n"))
		chunk := []byte(": " + strings.Repeat("k", 1022) + "\n")
		var written int64
		for written < 4*drainBytes {
			if _, err := w.Write(chunk); err != nil {
				failed <- written
				return
			}
			written += int64(len(chunk))
		}
		failed <- -1
	})
	if got := describe(attemptEvents(t, t.Context(), next)[0]); got != "final {} (HTTP 200)" {
		t.Fatalf("event %q, want the final answer", got)
	}
	if written := <-failed; written < drainBytes/2 || written > drainBytes {
		t.Errorf("writes after the answer failed after %d bytes, want after about %d", written, drainBytes)
	}
}

// Once the attempt's context ends, its holder is told at once, with the
// cause, even while the next handler ignores the context and holds the
// answer open.
func TestAttemptEndsWithItsContext(t *testing.T) {
	t.Parallel()
	for _, headFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("head written %v", headFirst), func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			defer close(release)
			entered := make(chan struct{})
			next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if headFirst {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
				}
				close(entered)
				<-release
			})
			cause := errors.New("task cancelled")
			ctx, cancel := context.WithCancelCause(t.Context())
			base := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/mcp", http.NoBody)
			a := StartAttempt(ctx, base, next, json.RawMessage(`7`), []byte(`{}`))
			<-entered
			cancel(cause)
			got := make(chan Event, 1)
			go func() { ev, _ := a.Until(context.Background(), nil, nil); got <- ev }()
			select {
			case ev := <-got:
				if !errors.Is(ev.Err, cause) {
					t.Errorf("event %q, want the cause %q", describe(ev), cause)
				}
			case <-time.After(time.Minute):
				t.Fatal("the attempt's holder still waits for a handler that ignores its context")
			}
		})
	}
}

// An upstream that stops talking, its connection still open, once the
// reading of its answer stopped (a malformed or oversized answer, or the
// answer itself) does not hold the call: the next handler's request ends
// after the drain, as a complete answer, and the attempt's last event
// comes then, not when the attempt's context ends (for a task, its
// run_timeout or ttl). The handler here ends its answer when its request
// ends, as reverse_proxy does when the transport's body read ends.
func TestAttemptEndsWhenUpstreamStallsAfterStop(t *testing.T) {
	t.Parallel()
	final := `{"jsonrpc":"2.0","id":7,"result":{}}`
	big := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("x", 3000) + `"}}`
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        string
	}{
		{"event not JSON-RPC", 200, "text/event-stream", "data: {\n\n", "failed: upstream event is not JSON-RPC: "},
		{"event over the limit", 200, "text/event-stream", "data: " + big + "\n\n", "failed: result too large ("},
		{"unexpected content type", 200, "text/html", "<html>", `failed: upstream answered with unexpected content type "text/html"`},
		{"HTTP failure with a body longer than kept", 502, "text/plain", strings.Repeat("b", MaxHTTPFailureBody+1), "error -32603 upstream answered HTTP 502: bbb"},
		{"the answer", 200, "text/event-stream", "data: " + final + "\n\n", "final {} (HTTP 200)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				ended := make(chan error, 1)
				next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", tt.contentType)
					w.WriteHeader(tt.status)
					_, _ = w.Write([]byte(tt.body))
					<-r.Context().Done() // silent, the connection open
					ended <- context.Cause(r.Context())
				})
				last := attemptInBubble(t, next, 1000)
				// Far past the drain, far short of any run_timeout.
				time.Sleep(time.Minute)
				synctest.Wait()
				select {
				case ev := <-last:
					if got := describe(ev); !strings.HasPrefix(got, tt.want) {
						t.Errorf("event %q, want %q", got, tt.want)
					}
				default:
					t.Fatalf("no last event a minute after the upstream went silent, want %q", tt.want)
				}
				select {
				case cause := <-ended:
					if !errors.Is(cause, io.EOF) {
						t.Errorf("the next handler's request ended with %v, want io.EOF (a complete answer)", cause)
					}
				default:
					t.Error("the next handler's request still runs a minute after the upstream went silent")
				}
			})
		})
	}
}

// An event that never ends is over the limit as one that ends too large
// is: it is counted, not kept, up to the most the gateway ever reads of a
// JSON answer, and then the attempt fails with "result too large", where
// waiting for the event's end would keep the task working until its
// run_timeout or ttl while the upstream streams on.
func TestAttemptEndsAnEventThatNeverEnds(t *testing.T) {
	t.Parallel()
	const limit = 1000
	tests := []struct {
		name string
		line []byte // written again and again
	}{
		{"one line", []byte(strings.Repeat("x", 64<<10))},
		{"many lines", []byte("data: " + strings.Repeat("x", 64<<10) + "\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte("data: "))
					// Far more than the gateway reads of one message, then
					// silent: a bound of the test's own.
					for written := 0; written < limit+MaxJSONAnswer+8*drainBytes; written += len(tt.line) {
						if _, err := w.Write(tt.line); err != nil {
							return
						}
					}
					<-r.Context().Done()
				})
				last := attemptInBubble(t, next, limit)
				time.Sleep(time.Minute)
				synctest.Wait()
				select {
				case ev := <-last:
					var tooLarge *TooLargeError
					if !errors.As(ev.Err, &tooLarge) || tooLarge.Limit != limit || tooLarge.Size <= limit+MaxJSONAnswer {
						t.Errorf("event %q, want result too large past %d bytes", describe(ev), limit+MaxJSONAnswer)
					}
				default:
					t.Fatal("no last event a minute after the upstream streamed an event past every limit")
				}
			})
		})
	}
}

// attemptInBubble starts, inside a synctest bubble, a call through next
// with the per-message limit, each request with a context of its own as in
// a task's run; the attempt's last event comes on the channel returned.
func attemptInBubble(t *testing.T, next http.Handler, limit int64) <-chan Event {
	t.Helper()
	// The shared pool's idle runners wait on a channel of no bubble; this
	// one's end, on the bubble's clock, as the test ends.
	t.Cleanup(func() { time.Sleep(2 * time.Second) })
	ctx := runners.WithPool(WithMaxResult(t.Context(), limit), runners.NewPool(time.Second))
	ctx = WithDetach(ctx, func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) })
	base := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/mcp", http.NoBody)
	a := StartAttempt(ctx, base, next, json.RawMessage(`7`), []byte(`{}`))
	last := make(chan Event, 1)
	go func() { ev, _ := a.Until(ctx, nil, nil); last <- ev }()
	return last
}
