package sse

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// readAll returns the events Reader reads from stream with limit, up to and
// including the first error (io.EOF at a clean end), without their Raw,
// which a Decoder does not keep.
func readAll(stream string, limit int) ([]Event, error) {
	r := NewLimitedReader(strings.NewReader(stream), limit)
	var out []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		ev.Raw = nil
		out = append(out, *ev)
	}
}

// decodeAll hands stream to a Decoder in pieces of the given sizes (the
// rest at once), then ends it.
func decodeAll(stream string, limit int, pieces []int) ([]Event, error) {
	d := NewDecoder(limit)
	var out []Event
	emit := func(ev *Event) error {
		out = append(out, *ev)
		return nil
	}
	p := []byte(stream)
	for _, n := range pieces {
		n = min(n, len(p))
		if err := d.Write(p[:n], emit); err != nil {
			return out, err
		}
		p = p[n:]
	}
	if err := d.Write(p, emit); err != nil {
		return out, err
	}
	return out, d.End(emit)
}

// sameEnd reports whether two decodings ended alike: the same error, or
// too large by the same count.
func sameEnd(a, b error) bool {
	ta, okA := errors.AsType[*TooLargeError](a)
	tb, okB := errors.AsType[*TooLargeError](b)
	if okA || okB {
		return okA && okB && *ta == *tb
	}
	return errors.Is(a, b) || a == nil && b == nil
}

func TestDecoderMatchesReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100)
	tests := []struct {
		name   string
		stream string
		limit  int
		pieces []int
	}{
		{"one event whole", "id: 1\ndata: {}\n\n", MaxEvent, nil},
		{"byte by byte", "id: 1\nretry: 20\nevent: e\ndata: a\ndata: b\n\n: ping\n\ndata: c\n\n", MaxEvent, repeat(1, 60)},
		{"CRLF split between CR and LF", "data: a\r\n\r\ndata: b\r\n\r\n", MaxEvent, []int{8, 1, 1, 1}},
		{"lone CR at a piece's end", "data: a\r\rdata: b\r\r", MaxEvent, []int{8, 1}},
		{"byte order mark split", "\ufeffdata: a\n\n", MaxEvent, []int{1, 1, 1}},
		{"cut in an event", "data: a\n\ndata: b", MaxEvent, []int{3}},
		{"last line without end", "data: a\n\ndata: b\n", MaxEvent, nil},
		{"over the limit in one line", "data: " + long + "\n\ndata: a\n\n", 50, []int{10, 10, 10, 10, 10, 10}},
		{"over the limit in many lines", strings.Repeat("data: "+long[:20]+"\n", 5) + "\n", 50, repeat(7, 30)},
		{"over the limit, cut", "data: " + long, 50, []int{30}},
		{"long line ending in CR across pieces", "data: " + long + "\r", 50, []int{106, 1}},
		{"byte order mark on a long first line", "\ufeff" + "data: " + long[:45] + "\n\n", 50, []int{2, 60}},
		{"within the limit by the byte order mark", "\ufeff" + "data: " + long[:43] + "\n\n", 50, []int{1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := readAll(tt.stream, tt.limit)
			got, gotErr := decodeAll(tt.stream, tt.limit, tt.pieces)
			if !reflect.DeepEqual(got, want) || !sameEnd(gotErr, wantErr) {
				t.Errorf("Decoder: %+v, %v\nReader:  %+v, %v", got, gotErr, want, wantErr)
			}
		})
	}
}

// An error of emit stops the decoding: later bytes emit nothing.
func TestDecoderStopsOnEmitError(t *testing.T) {
	t.Parallel()
	d := NewDecoder(MaxEvent)
	stop := errors.New("enough")
	n := 0
	emit := func(*Event) error { n++; return stop }
	if err := d.Write([]byte("data: a\n\ndata: b\n\n"), emit); !errors.Is(err, stop) {
		t.Fatalf("Write = %v, want %v", err, stop)
	}
	if err := d.Write([]byte("data: c\n\n"), emit); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("Write after the error = %v with %d events, want %v with 1", err, n, stop)
	}
	if err := d.End(emit); !errors.Is(err, stop) {
		t.Fatalf("End = %v, want %v", err, stop)
	}
}

// Pending counts the event under way, its current line too, whether kept
// or past the limit, and nothing once the event has ended.
func TestDecoderPending(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		limit  int
		want   int
	}{
		{"nothing", "", MaxEvent, 0},
		{"a line under way", "data: ab", MaxEvent, 8},
		{"a line and one under way", "id: 1\ndata: ab", MaxEvent, 6 + 8},
		{"an ended event", "data: a\n\n", MaxEvent, 0},
		{"after an ended event", "data: a\n\ndata", MaxEvent, 4},
		{"a line past the limit", "data: " + strings.Repeat("x", 100), 10, 106},
		{"lines past the limit", "data: " + strings.Repeat("x", 100) + "\ndata: y", 10, 107 + 7},
		{"CR line ends", "data: a\rdata: b\r", MaxEvent, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDecoder(tt.limit)
			for i := range len(tt.stream) { // byte by byte: the count must not depend on the pieces
				if err := d.Write([]byte{tt.stream[i]}, func(*Event) error { return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if got := d.Pending(); got != tt.want {
				t.Errorf("Pending() = %d, want %d", got, tt.want)
			}
		})
	}
}

func repeat(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}

// FuzzDecoder checks that a Decoder handed a stream in any pieces, with
// any limit, gives the events and the end a Reader gives.
func FuzzDecoder(f *testing.F) {
	f.Add("id: 1\nretry: 20\ndata: a\ndata: b\n\n: c\n\ndata: d", []byte{1, 5, 2}, uint8(0))
	f.Add("\ufeffdata: x\r\n\r\nid\r\ndata: y\r\rdata: z\n\n", []byte{3, 1, 1}, uint8(9))
	f.Add("data: "+strings.Repeat("y", 80)+"\r\n\r\ndata: ok\n\n", []byte{40, 40, 1}, uint8(30))
	f.Fuzz(func(t *testing.T, stream string, cuts []byte, limit uint8) {
		if len(stream) > 1<<12 {
			return
		}
		lim := MaxEvent
		if limit > 0 {
			lim = int(limit)
		}
		pieces := make([]int, len(cuts))
		for i, c := range cuts {
			pieces[i] = int(c)
		}
		want, wantErr := readAll(stream, lim)
		got, gotErr := decodeAll(stream, lim, pieces)
		if !reflect.DeepEqual(got, want) || !sameEnd(gotErr, wantErr) {
			t.Fatalf("stream %q limit %d pieces %v:\nDecoder: %+v, %v\nReader:  %+v, %v", stream, lim, pieces, got, gotErr, want, wantErr)
		}
	})
}

func ExampleDecoder() {
	d := NewDecoder(MaxEvent)
	emit := func(ev *Event) error {
		fmt.Printf("id %q data %q\n", ev.ID, ev.Data)
		return nil
	}
	// Pieces as a response writer receives them, cut anywhere.
	for _, piece := range []string{"id: 7\nda", "ta: {\"jsonrpc\":", "\"2.0\"}\n", "\n"} {
		_ = d.Write([]byte(piece), emit)
	}
	fmt.Println(errors.Is(d.End(emit), io.EOF))
	// Output:
	// id "7" data "{\"jsonrpc\":\"2.0\"}"
	// true
}
