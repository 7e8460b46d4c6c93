package taskproxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestSSEReader(t *testing.T) {
	type ev struct {
		id, typ, data, retry string
		hasID                bool
	}
	tests := []struct {
		name    string
		in      string
		want    []ev
		wantErr error
	}{
		{name: "one event", in: "data: {\"a\":1}\n\n", want: []ev{{data: `{"a":1}`}}},
		{name: "crlf and fields", in: "id: 5\r\nevent: message\r\ndata: x\r\n\r\n", want: []ev{{id: "5", hasID: true, typ: "message", data: "x"}}},
		{name: "lone cr", in: "data: a\rdata: b\r\r", want: []ev{{data: "a\nb"}}},
		{name: "multi-line data", in: "data: one\ndata: two\n\n", want: []ev{{data: "one\ntwo"}}},
		{name: "no space after colon", in: "data:x\n\n", want: []ev{{data: "x"}}},
		{name: "comment and priming", in: ": keep-alive\n\nid: 1\ndata:\n\ndata: y\n\n", want: []ev{{}, {id: "1", hasID: true}, {data: "y"}}},
		{name: "leading blank lines", in: "\n\ndata: z\n\n", want: []ev{{data: "z"}}},
		// The WHATWG event-stream rules: one leading byte order mark is
		// ignored, an empty id field resets the last event id, and a retry
		// field of anything but ASCII digits is ignored.
		{name: "leading byte order mark", in: "\xef\xbb\xbfdata: a\n\n", want: []ev{{data: "a"}}},
		{name: "byte order mark later is part of the name", in: "data: a\n\n\xef\xbb\xbfdata: b\n\n", want: []ev{{data: "a"}, {}}},
		{name: "empty id resets", in: "id: 7\ndata: a\n\nid\ndata: b\n\nid:\ndata: c\n\n", want: []ev{{id: "7", hasID: true, data: "a"}, {hasID: true, data: "b"}, {hasID: true, data: "c"}}},
		{name: "id with NUL ignored", in: "id: a\x00b\ndata: x\n\n", want: []ev{{data: "x"}}},
		{name: "retry digits", in: "retry: 1500\ndata: x\n\n", want: []ev{{retry: "1500", data: "x"}}},
		{name: "retry with a sign ignored", in: "retry: +100\ndata: x\n\nretry: -5\ndata: y\n\nretry: 1e3\ndata: z\n\nretry:\ndata: w\n\n", want: []ev{{data: "x"}, {data: "y"}, {data: "z"}, {data: "w"}}},
		{name: "cut mid-event", in: "data: a\n\ndata: part", want: []ev{{data: "a"}}, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewSSEReader(strings.NewReader(tt.in))
			var got []ev
			var err error
			for {
				var e *Event
				if e, err = r.Next(); err != nil {
					break
				}
				got = append(got, ev{id: e.ID, hasID: e.HasID, typ: e.Type, data: e.Data, retry: e.Retry})
			}
			want := tt.wantErr
			if want == nil {
				want = io.EOF
			}
			if !errors.Is(err, want) {
				t.Fatalf("end error = %v, want %v", err, want)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSSERawRoundTrip(t *testing.T) {
	in := "id: 9\nevent: message\ndata: {\"x\":1}\n\n: c\n\n"
	r := NewSSEReader(strings.NewReader(in))
	var raw bytes.Buffer
	for {
		e, err := r.Next()
		if err != nil {
			break
		}
		raw.Write(e.Raw)
	}
	if raw.String() != in {
		t.Errorf("raw = %q, want %q", raw.String(), in)
	}
}

func TestSSEWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	w := StartSSE(rec)
	if err := w.WriteEvent("", []byte("line1\nline2")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteComment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := rec.Header().Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering = %q", got)
	}
	r := NewSSEReader(rec.Body)
	e, err := r.Next()
	if err != nil || e.Data != "line1\nline2" {
		t.Fatalf("read back %+v, %v", e, err)
	}
}

func TestCompleteEventsLen(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0},
		{"data: a\n", 0},
		{"data: a\n\n", 9},
		{"data: a\n\ndata: b", 9},
		{"data: a\r\n\r\ndata: b\r\n", 11},
		{"data: a\r\r", 0}, // a trailing "\r" may still become "\r\n"
		{"data: a\r\rx", 9},
	}
	for _, tt := range tests {
		if got := completeEventsLen([]byte(tt.in)); got != tt.want {
			t.Errorf("completeEventsLen(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// A worker reading an upstream's event stream keeps the position the rules
// give: an empty id clears the id a resumption would send, a retry that is
// not all digits leaves the delay as it was, and a leading byte order mark
// does not hide the first event.
func TestReadMessagesStreamPosition(t *testing.T) {
	const note = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	tests := []struct {
		name      string
		stream    string
		wantID    string
		wantRetry time.Duration
		wantMsgs  int
	}{
		{"id kept", "id: 5\nretry: 50\ndata: " + note + "\n\n", "5", 50 * time.Millisecond, 1},
		{"empty id resets", "id: 5\ndata: " + note + "\n\nid:\ndata: " + note + "\n\n", "", 0, 2},
		{"bare id resets", "id: 5\ndata: " + note + "\n\nid\ndata: " + note + "\n\n", "", 0, 2},
		{"signed retry ignored", "retry: 50\ndata: " + note + "\n\nretry: +100\ndata: " + note + "\n\n", "", 50 * time.Millisecond, 2},
		{"byte order mark", "\xef\xbb\xbfid: 1\ndata: " + note + "\n\n", "1", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := &upstreamResponse{Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(tt.stream))}
			var pos streamPosition
			msgs := 0
			err := readMessages(resp, &pos, 1<<20, func(*Message) (bool, error) { msgs++; return false, nil })
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if pos.lastID != tt.wantID || pos.retry != tt.wantRetry || msgs != tt.wantMsgs {
				t.Errorf("last id %q, retry %s, %d messages; want %q, %s, %d", pos.lastID, pos.retry, msgs, tt.wantID, tt.wantRetry, tt.wantMsgs)
			}
		})
	}
}
