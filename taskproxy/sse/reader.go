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
	sc    *bufio.Scanner
	raw   bytes.Buffer
	limit int
	// started is set once the first line is read: a byte order mark is
	// ignored only at the start of the stream.
	started bool
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
	return &Reader{sc: sc, limit: min(limit, MaxEvent)}
}

// Next returns the next event, or io.EOF at a clean end of stream. Comment-only
// blocks come back as events without data, so that they can be relayed.
// A stream that ends in the middle of an event yields io.ErrUnexpectedEOF.
func (s *Reader) Next() (*Event, error) {
	s.raw.Reset()
	var ev Event
	var data strings.Builder
	pending := false
	size := 0 // of the event so far; past the limit it is counted, not kept
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		size += len(line) + 1
		if size <= s.limit {
			s.raw.Write(line)
			s.raw.WriteByte('\n')
		}
		if len(line) == 0 {
			if !pending {
				s.raw.Reset()
				size = 0
				continue
			}
			if size > s.limit {
				return nil, &TooLargeError{Size: int64(size), Limit: int64(s.limit)}
			}
			ev.Data = data.String()
			ev.Raw = bytes.Clone(s.raw.Bytes())
			return &ev, nil
		}
		pending = true
		if size > s.limit {
			continue
		}
		field, value := parseLine(line)
		switch field {
		case "data":
			if ev.HasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			ev.HasData = true
		case "event":
			ev.Type = value
		case "id":
			if !strings.ContainsRune(value, 0) {
				ev.ID, ev.HasID = value, true
			}
		case "retry":
			if isASCIIDigits(value) {
				ev.Retry = value
			}
		}
	}
	if err := s.sc.Err(); err != nil {
		return nil, fmt.Errorf("reading event stream: %w", err)
	}
	if pending && size > s.limit {
		return nil, &TooLargeError{Size: int64(size), Limit: int64(s.limit)}
	}
	if pending {
		return nil, io.ErrUnexpectedEOF
	}
	return nil, io.EOF
}

// isASCIIDigits reports whether s is one or more of the digits 0-9, the
// only retry value an event stream may carry.
func isASCIIDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseLine splits "field: value"; a line starting with ':' is a comment.
func parseLine(line []byte) (field, value string) {
	if line[0] == ':' {
		return "", ""
	}
	name, val, found := bytes.Cut(line, []byte{':'})
	if !found {
		return string(line), ""
	}
	val = bytes.TrimPrefix(val, []byte{' '})
	return string(name), string(val)
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
