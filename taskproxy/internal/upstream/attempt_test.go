package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

func TestSessionLost(t *testing.T) {
	t.Parallel()
	answer := func(status int, e *jsonrpc.Error) Event {
		return Event{Final: &jsonrpc.Message{JSONRPC: "2.0", Error: e}, Head: &Head{Status: status}}
	}
	tests := []struct {
		name string
		ev   Event
		want bool
	}{
		{"404", answer(http.StatusNotFound, nil), true},
		{"400 naming the session", answer(http.StatusBadRequest, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Bad Request: No valid Session ID provided")), true},
		{"400 for something else", answer(http.StatusBadRequest, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Bad Request: malformed")), false},
		{"200 with an error", answer(http.StatusOK, jsonrpc.Errorf(jsonrpc.CodeInternalError, "session gone")), false},
		{"a transport failure", Event{Err: http.ErrHandlerTimeout}, false},
	}
	for _, tt := range tests {
		if got := SessionLost(tt.ev); got != tt.want {
			t.Errorf("%s: SessionLost = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReadAnswer(t *testing.T) {
	t.Parallel()
	sse := func(body string) *Response {
		return &Response{Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
	}
	const note = `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`
	tests := []struct {
		name    string
		resp    *Response
		id      json.RawMessage
		want    string // the answer's id; "" for none
		wantEOF bool
	}{
		{"json", &Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":"g:1","result":{}}`))}, json.RawMessage(`"g:1"`), `"g:1"`, false},
		{"stream, after a notification and another response", sse("data: " + note + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"g:1\",\"result\":{}}\n\n"), json.RawMessage(`"g:1"`), `"g:1"`, false},
		{"any response", sse("data: " + note + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"), nil, `7`, false},
		{"ended without it", sse("data: " + note + "\n\n"), json.RawMessage(`"g:1"`), "", true},
	}
	for _, tt := range tests {
		got, err := ReadAnswer(tt.resp, tt.id, 1<<20)
		switch {
		case tt.want != "" && (got == nil || string(got.ID) != tt.want):
			t.Errorf("%s: answer %v, %v; want id %s", tt.name, got, err, tt.want)
		case tt.want == "" && (got != nil || !errors.Is(err, io.EOF) != !tt.wantEOF):
			t.Errorf("%s: answer %v, %v; want none and io.EOF", tt.name, got, err)
		}
	}
}

// Until hands the events before the last to its handler, stops at the
// last one or one the handler keeps, returns false when the tick fires
// first (losing no event), and reads a closed channel as the context's end.
func TestAttemptUntil(t *testing.T) {
	t.Parallel()
	note := Event{Notification: &jsonrpc.Message{Method: "notifications/progress"}}
	req := Event{Request: &jsonrpc.Message{Method: "elicitation/create"}}
	final := Event{Final: &jsonrpc.Message{Result: []byte(`{}`)}}
	keepRequests := func(ev Event) bool { return ev.Request != nil }
	tests := []struct {
		name    string
		events  []Event
		close   bool
		keep    func(Event) bool
		want    Event
		handled int
	}{
		{"the last event", []Event{note, note, final}, false, nil, final, 2},
		{"a kept event", []Event{note, req, final}, false, keepRequests, req, 2},
		{"an event not kept", []Event{req, final}, false, func(Event) bool { return false }, final, 1},
		{"closed without a last event", []Event{note}, true, nil, Event{Err: context.Canceled}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch := make(chan Event, len(tt.events))
			for _, ev := range tt.events {
				ch <- ev
			}
			if tt.close {
				close(ch)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			handled := 0
			on := func(ev Event) bool {
				handled++
				return tt.keep != nil && tt.keep(ev)
			}
			got, last := (&Attempt{Events: ch}).Until(ctx, nil, on)
			if !last || got.Final != tt.want.Final || got.Request != tt.want.Request || !errors.Is(got.Err, tt.want.Err) || (got.Err == nil) != (tt.want.Err == nil) {
				t.Errorf("Until = %+v %v, want %+v", got, last, tt.want)
			}
			if handled != tt.handled {
				t.Errorf("handler saw %d events, want %d", handled, tt.handled)
			}
		})
	}
	t.Run("the tick fires first", func(t *testing.T) {
		t.Parallel()
		ch := make(chan Event, 1)
		tick := make(chan time.Time, 1)
		tick <- time.Now()
		a := &Attempt{Events: ch}
		if _, last := a.Until(context.Background(), After(tick), nil); last {
			t.Fatal("Until ended without an event")
		}
		ch <- final
		if got, last := a.Until(context.Background(), After(tick), nil); !last || got.Final != final.Final {
			t.Errorf("after the tick: %+v %v, want the final event", got, last)
		}
	})
	// A timer the handler arms (the worker's progress throttle) is seen:
	// the tick is asked again after each event.
	t.Run("a tick armed by the handler", func(t *testing.T) {
		t.Parallel()
		ch := make(chan Event, 1)
		ch <- note
		var armed chan time.Time
		on := func(Event) bool {
			armed = make(chan time.Time, 1)
			armed <- time.Now()
			return false
		}
		done := make(chan bool, 1)
		go func() {
			_, last := (&Attempt{Events: ch}).Until(context.Background(), func() <-chan time.Time { return armed }, on)
			done <- last
		}()
		select {
		case last := <-done:
			if last {
				t.Error("Until ended with an event, want the armed tick")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Until never saw the tick armed by its handler")
		}
	})
}
