package sse

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// MaxEvent bounds one event when no smaller limit is given, so a broken
// stream cannot make a reader buffer without limit.
const MaxEvent = 64 << 20

// Event is one Server-Sent Event as dispatched by the WHATWG algorithm: data
// lines joined with "\n", plus the raw bytes it came in, so that a pass-through
// can re-emit it unchanged.
type Event struct {
	// ID is the event's id field; with HasID, even empty, it replaces the
	// stream's last event id (an empty "id:" resets it, as the rules say).
	ID    string
	HasID bool
	Type  string // the "event" field; empty means "message"
	Data  string
	// Retry is the reconnection time in milliseconds, only ever ASCII
	// digits: a retry field with anything else is ignored, as the rules say.
	Retry   string
	HasData bool
	Raw     []byte // every line of the event, including its blank terminator
}

// TooLargeError is an event over the reader's limit.
type TooLargeError struct{ Size, Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("event too large (%d bytes, limit %d)", e.Size, e.Limit)
}

// utf8BOM is the UTF-8 encoding of U+FEFF, the byte order mark.
var utf8BOM = []byte("\xef\xbb\xbf")

// Reader reads events from a text/event-stream body.
type Reader struct {
	sc *bufio.Scanner
	d  lineDecoder
}

// NewReader returns a reader of the events in r, each at most MaxEvent bytes.
func NewReader(r io.Reader) *Reader { return NewLimitedReader(r, MaxEvent) }

// NewLimitedReader returns a reader of the events in r that refuses an event
// of more than limit bytes (at most MaxEvent) with a *TooLargeError: an
// event's data lines accumulate, and a broken or hostile stream could
// otherwise make the reader hold any amount of them.
func NewLimitedReader(r io.Reader, limit int) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxEvent)
	sc.Split(scanLines)
	return &Reader{sc: sc, d: lineDecoder{limit: min(limit, MaxEvent)}}
}

// Next returns the next event, or io.EOF at a clean end of stream. Comment-only
// blocks come back as events without data, so that they can be relayed.
// A stream that ends in the middle of an event yields io.ErrUnexpectedEOF.
func (s *Reader) Next() (*Event, error) {
	for s.sc.Scan() {
		if ev, err := s.d.line(s.sc.Bytes()); ev != nil || err != nil {
			return ev, err
		}
	}
	if err := s.sc.Err(); err != nil {
		return nil, fmt.Errorf("reading event stream: %w", err)
	}
	return nil, s.d.end()
}

// lineDecoder is the event-stream rules applied line by line: what Reader
// (which pulls lines) and Decoder (which is handed bytes) share.
type lineDecoder struct {
	limit int
	// noRaw leaves Event.Raw empty: the raw bytes are not kept.
	noRaw bool
	// started is set once the first line is read: a byte order mark is
	// ignored only at the start of the stream.
	started bool

	// The event so far.
	ev      Event
	data    strings.Builder
	raw     bytes.Buffer
	pending bool // a line of it was read
	size    int  // its bytes; past the limit they are counted, not kept
}

// line takes the next line of the stream, without its terminator, and
// returns the event it completes, if any.
func (d *lineDecoder) line(line []byte) (*Event, error) {
	if !d.started {
		d.started = true
		line = bytes.TrimPrefix(line, utf8BOM)
	}
	d.size += len(line) + 1
	if d.size <= d.limit && !d.noRaw {
		d.raw.Write(line)
		d.raw.WriteByte('\n')
	}
	if len(line) == 0 {
		if !d.pending {
			d.raw.Reset()
			d.size = 0
			return nil, nil
		}
		defer d.reset()
		if d.size > d.limit {
			return nil, &TooLargeError{Size: int64(d.size), Limit: int64(d.limit)}
		}
		ev := d.ev
		ev.Data = d.data.String()
		if !d.noRaw {
			ev.Raw = bytes.Clone(d.raw.Bytes())
		}
		return &ev, nil
	}
	d.pending = true
	if d.size > d.limit {
		return nil, nil
	}
	field, value := parseLine(line)
	switch string(field) {
	case "data":
		if d.ev.HasData {
			d.data.WriteByte('\n')
		}
		d.data.Write(value) // one copy of the data, however long
		d.ev.HasData = true
	case "event":
		d.ev.Type = string(value)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.ev.ID, d.ev.HasID = string(value), true
		}
	case "retry":
		if isASCIIDigits(value) {
			d.ev.Retry = string(value)
		}
	}
	return nil, nil
}

// counted takes a line of n bytes that is past the limit: only its size
// matters, the event being too large already.
func (d *lineDecoder) counted(n int) {
	d.started = true
	d.size += n + 1
	d.pending = true
}

// overLimit reports whether a line of n bytes more would be past the limit
// whatever it holds (a byte order mark it might start with included).
func (d *lineDecoder) overLimit(n int) bool {
	return d.size+n+1 > d.limit+len(utf8BOM)
}

// end is the end of the stream: io.EOF between events,
// io.ErrUnexpectedEOF (or a *TooLargeError) within one.
func (d *lineDecoder) end() error {
	defer d.reset()
	switch {
	case d.pending && d.size > d.limit:
		return &TooLargeError{Size: int64(d.size), Limit: int64(d.limit)}
	case d.pending:
		return io.ErrUnexpectedEOF
	}
	return io.EOF
}

// reset starts a new event.
func (d *lineDecoder) reset() {
	d.ev = Event{}
	d.data.Reset()
	d.raw.Reset()
	d.pending, d.size = false, 0
}

// isASCIIDigits reports whether s is one or more of the digits 0-9, the
// only retry value an event stream may carry.
func isASCIIDigits(s []byte) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(s) > 0
}

// parseLine splits "field: value"; a line starting with ':' is a comment,
// whose field is empty. Both alias line.
func parseLine(line []byte) (field, value []byte) {
	if line[0] == ':' {
		return nil, nil
	}
	name, val, found := bytes.Cut(line, []byte{':'})
	if !found {
		return line, nil
	}
	return name, bytes.TrimPrefix(val, []byte{' '})
}

// scanLines splits on "\r\n", "\n" or a lone "\r", as event streams allow,
// keeping the terminator out of the token.
func scanLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // need one more byte to tell "\r" from "\r\n"
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// CompleteLen returns the length of the prefix of b that holds whole events:
// everything up to and including the last blank line.
func CompleteLen(b []byte) int {
	end, lineStart := 0, 0
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' && b[i] != '\r' {
			continue
		}
		lineLen := i - lineStart
		if b[i] == '\r' {
			if i+1 >= len(b) {
				break // cannot tell "\r" from "\r\n" yet
			}
			if b[i+1] == '\n' {
				i++
			}
		}
		if lineLen == 0 {
			end = i + 1
		}
		lineStart = i + 1
	}
	return end
}
