package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// refEvent is an event as the WHATWG "interpret an event stream" rules
// dispatch it.
type refEvent struct {
	data, typ, lastID, retry string
}

// referenceEvents parses stream by the WHATWG rules, written from the spec
// and nothing else: a leading BOM is dropped; lines end at CRLF, LF or CR; a
// blank line dispatches (an event whose data buffer is empty is not
// dispatched); a line starting with a colon is a comment; "field:value"
// drops one space after the colon, a line without a colon is a field with an
// empty value; data appends value and LF; event sets the type; id sets the
// last event id unless the value holds NUL (and it persists across events);
// retry is taken only when all ASCII digits. The trailing LF of the data
// buffer is removed at dispatch. What follows the last blank line is not
// dispatched.
func referenceEvents(stream string) []refEvent {
	stream = strings.TrimPrefix(stream, "\ufeff")
	var lines []string
	for len(stream) > 0 {
		i := strings.IndexAny(stream, "\r\n")
		if i < 0 {
			lines = append(lines, stream) // unterminated: never completes an event
			lines = append(lines, "\x00unterminated")
			break
		}
		lines = append(lines, stream[:i])
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]
	}
	var out []refEvent
	var data strings.Builder
	var typ, lastID, retry string
	for _, line := range lines {
		if line == "\x00unterminated" {
			break
		}
		if line == "" {
			if data.Len() > 0 {
				out = append(out, refEvent{data: strings.TrimSuffix(data.String(), "\n"), typ: typ, lastID: lastID, retry: retry})
			}
			data.Reset()
			typ, retry = "", ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "event":
			typ = value
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				retry = value
			}
		}
	}
	return out
}

// readerEvents reads stream with Reader, keeping the last event id across
// events as a consumer does, and returns the events the rules dispatch
// (those with data) and whether the stream ended cleanly.
func readerEvents(stream string) ([]refEvent, error) {
	r := NewReader(strings.NewReader(stream))
	var out []refEvent
	lastID := ""
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		if ev.HasID {
			lastID = ev.ID
		}
		if ev.HasData {
			out = append(out, refEvent{data: ev.Data, typ: ev.Type, lastID: lastID, retry: ev.Retry})
		}
	}
}

// FuzzReader checks Reader against referenceEvents: the same events, with
// the same data, type, last event id and retry, for every stream.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"id: 1\nretry: 1500\ndata:\n\n: keep-alive\n\ndata: a\ndata: b\n\n",
		"\ufeffdata: x\r\n\r\nid\r\ndata: y\r\rdata: z\n\n",
		"id: 5\ndata: a\n\nid:\ndata: b\n\nretry: +100\ndata: c\n\n",
		"data: cut",
		"data\n\nevent: ping\n\n",
		"id: a\x00b\ndata: x\n\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, stream string) {
		if len(stream) > 1<<16 {
			return
		}
		want := referenceEvents(stream)
		got, err := readerEvents(stream)
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Next(%q): %v", stream, err)
		}
		if len(got) != len(want) {
			t.Fatalf("stream %q: %d events %+v, the rules give %d %+v", stream, len(got), got, len(want), want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("stream %q: event %d is %+v, the rules give %+v", stream, i, got[i], want[i])
			}
		}
		// What Reader re-emits raw is what it read.
		var raw bytes.Buffer
		r := NewReader(strings.NewReader(stream))
		for {
			ev, err := r.Next()
			if err != nil {
				break
			}
			raw.Write(ev.Raw)
		}
		if _, err := readerEvents(raw.String()); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("the raw bytes of %q do not read back: %v", stream, err)
		}
	})
}
