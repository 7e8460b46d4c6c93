package upstream

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// eventStream is an answer of n progress notifications and a response, as
// an event stream, each message an event of its own.
func eventStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		b.WriteString("id: " + strings.Repeat("e", i%3+1) + "\n")
		b.WriteString(`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}` + "\n\n")
	}
	b.WriteString(`data: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}` + "\n\n")
	return b.Bytes()
}

// decodeEvents writes stream through an answerWriter, as an attempt's next
// handler does, in one piece, and returns how many messages it handed on.
func decodeEvents(tb testing.TB, stream []byte) int {
	tb.Helper()
	var pos StreamPosition
	n := 0
	w := &answerWriter{header: http.Header{"Content-Type": {"text/event-stream"}}, limit: DefaultMaxResultBytes, pos: &pos,
		on: func(*jsonrpc.Message) (bool, error) { n++; return false, nil }}
	if _, err := w.Write(stream); err != nil {
		tb.Fatal(err)
	}
	if err := w.end(nil); !errors.Is(err, io.EOF) {
		tb.Fatalf("the stream ended with %v, want io.EOF", err)
	}
	return n
}

// An event's data is parsed where the event decoder left it, not copied
// once more: what one message of a stream costs is its event (with its id
// and data) and its message. Every message of a call's answer, each
// progress notification included, pays it.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestEventMessageAllocs(t *testing.T) {
	const events = 50
	few, many := eventStream(0), eventStream(events)
	if n := decodeEvents(t, many); n != events+1 {
		t.Fatalf("%d messages handed on, want %d", n, events+1)
	}
	// The answerWriter, its header clone and the decoder are the same
	// for both streams: the difference is what the events cost.
	base := testing.AllocsPerRun(20, func() { decodeEvents(t, few) })
	all := testing.AllocsPerRun(20, func() { decodeEvents(t, many) })
	// Per event, about 5.7 here: the Event, its id (two in three of these
	// ids), its data, the message parsed from it and its method's name,
	// and the decoder's own. A copy of the data to parse made it 6.7.
	const want = 6
	if per := (all - base) / events; per > want {
		t.Errorf("an event of the answer cost %.1f allocations, want at most %d", per, want)
	}
}

// The same through ReadMessages, the reader of an answer read through a
// pipe (probes, and the calls of the version bridges).
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestReadMessagesEventAllocs(t *testing.T) {
	const events = 50
	read := func(stream []byte) {
		resp := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(stream))}
		var pos StreamPosition
		if err := ReadMessages(resp, &pos, DefaultMaxResultBytes, func(*jsonrpc.Message) (bool, error) { return false, nil }); !errors.Is(err, io.EOF) {
			t.Fatalf("the stream ended with %v, want io.EOF", err)
		}
	}
	few, many := eventStream(0), eventStream(events)
	base := testing.AllocsPerRun(20, func() { read(few) })
	all := testing.AllocsPerRun(20, func() { read(many) })
	// Per event, about 6.7 here: as above, and the event's raw bytes,
	// which the reader keeps for a pass-through. A copy of the data to
	// parse made it 7.7.
	const want = 7
	if per := (all - base) / events; per > want {
		t.Errorf("an event of the answer cost %.1f allocations, want at most %d", per, want)
	}
}

// A message parsed from an event holds slices of the event's data: they
// stay as they were while the decoder goes on to the next events, and
// editing the message (as the gateway does, on a copy) leaves the event's
// data as it came.
func TestEventMessagesOutliveTheirEvent(t *testing.T) {
	t.Parallel()
	stream := "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"n\":1}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"n\":2222222222}}\n\n" +
		"data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"n\":3}}\n\n"
	for _, via := range []string{"answerWriter", "ReadMessages"} {
		var kept []*jsonrpc.Message
		on := func(m *jsonrpc.Message) (bool, error) { kept = append(kept, m); return false, nil }
		var pos StreamPosition
		switch via {
		case "answerWriter":
			w := &answerWriter{header: http.Header{"Content-Type": {"text/event-stream"}}, limit: DefaultMaxResultBytes, pos: &pos, on: on}
			for i := range len(stream) { // a byte at a time: the decoder's buffers are reused most
				_, _ = w.Write([]byte{stream[i]})
			}
			_ = w.end(nil)
		case "ReadMessages":
			resp := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream))}
			_ = ReadMessages(resp, &pos, DefaultMaxResultBytes, on)
		}
		want := []string{`{"n":1}`, `{"n":2222222222}`, `{"n":3}`}
		if len(kept) != len(want) {
			t.Fatalf("%s: %d messages, want %d", via, len(kept), len(want))
		}
		for i, m := range kept {
			if string(m.Result) != want[i] || string(m.ID) != string(rune('1'+i)) {
				t.Errorf("%s: message %d reads id %s result %s once the stream is read, want id %d result %s", via, i, m.ID, m.Result, i+1, want[i])
			}
		}
	}
}

// BenchmarkStreamAnswer is an attempt reading an answer of 20 progress
// notifications and the response, as an event stream.
func BenchmarkStreamAnswer(b *testing.B) {
	stream := eventStream(20)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		decodeEvents(b, stream)
	}
}
