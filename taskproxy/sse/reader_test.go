package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	t.Parallel()
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
			t.Parallel()
			r := NewReader(strings.NewReader(tt.in))
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

func TestRawRoundTrip(t *testing.T) {
	t.Parallel()
	in := "id: 9\nevent: message\ndata: {\"x\":1}\n\n: c\n\n"
	r := NewReader(strings.NewReader(in))
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

func TestCompleteLen(t *testing.T) {
	t.Parallel()
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
		if got := CompleteLen([]byte(tt.in)); got != tt.want {
			t.Errorf("CompleteLen(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
