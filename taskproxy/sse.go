package taskproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// maxSSEEvent bounds one SSE event, so a broken upstream cannot make the
// gateway buffer without limit.
const maxSSEEvent = 64 << 20

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

// SSEReader reads events from a text/event-stream body.
type SSEReader struct {
	sc    *bufio.Scanner
	raw   bytes.Buffer
	limit int
	// started is set once the first line is read: a byte order mark is
	// ignored only at the start of the stream.
	started bool
}

// NewSSEReader returns a reader of the events in r.
func NewSSEReader(r io.Reader) *SSEReader { return newLimitedSSEReader(r, maxSSEEvent) }

// newLimitedSSEReader returns a reader of the events in r that refuses an
// event of more than limit bytes with a *tooLargeError: an event's data
// lines accumulate, and a broken or hostile upstream could otherwise make
// the gateway hold any amount of them.
func newLimitedSSEReader(r io.Reader, limit int) *SSEReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxSSEEvent)
	sc.Split(scanSSELines)
	return &SSEReader{sc: sc, limit: limit}
}

// tooLargeError is an upstream answer over the configured size limit.
type tooLargeError struct{ size, limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("result too large (%d bytes, limit %d)", e.size, e.limit)
}

// Next returns the next event, or io.EOF at a clean end of stream. Comment-only
// blocks come back as events without data, so that they can be relayed.
// A stream that ends in the middle of an event yields io.ErrUnexpectedEOF.
func (s *SSEReader) Next() (*Event, error) {
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
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			if !pending {
				s.raw.Reset()
				size = 0
				continue
			}
			if size > s.limit {
				return nil, &tooLargeError{size: int64(size), limit: int64(s.limit)}
			}
			ev.Data = data.String()
			ev.Raw = bytes.Clone(s.raw.Bytes())
			return &ev, nil
		}
		pending = true
		if size > s.limit {
			continue
		}
		field, value := parseSSELine(bytes.TrimRight(line, "\r\n"))
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
		return nil, &tooLargeError{size: int64(size), limit: int64(s.limit)}
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

// parseSSELine splits "field: value"; a line starting with ':' is a comment.
func parseSSELine(line []byte) (field, value string) {
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

// scanSSELines splits on "\r\n", "\n" or a lone "\r", as event streams allow,
// keeping the terminator out of the token.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
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

// sseWriteTimeout bounds the write of one event: a client that stops
// reading must not hold its handler, and with it caddy reload and caddy
// stop, forever. A client that reads slowly but reads keeps its stream.
var sseWriteTimeout = 10 * time.Second

// SSEWriter writes events to an HTTP response and flushes each one.
type SSEWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

// StartSSE sets the event-stream headers, writes status 200 and returns the
// writer. X-Accel-Buffering stops intermediaries (nginx and the like) from
// holding events back.
func StartSSE(w http.ResponseWriter) *SSEWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	s := &SSEWriter{w: w, rc: http.NewResponseController(w)}
	_ = s.write(nil)
	return s
}

// WriteEvent writes one "message" event whose data is the given bytes.
func (s *SSEWriter) WriteEvent(id string, data []byte) error {
	var b bytes.Buffer
	b.Grow(len(data) + 32)
	appendSSEEvent(&b, id, id != "", "", data)
	if err := s.write(b.Bytes()); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}

// WriteResumable writes an event with an id, empty data and a reconnection
// delay: the client may reconnect after retry with the id as Last-Event-ID
// (the stream is closed after it, the request not answered).
func (s *SSEWriter) WriteResumable(id string, retry time.Duration) error {
	ev := fmt.Sprintf("id: %s\nretry: %d\ndata: \n\n", id, retry.Milliseconds())
	if err := s.write([]byte(ev)); err != nil {
		return fmt.Errorf("writing resumable event: %w", err)
	}
	return nil
}

// WriteComment writes a comment line, used as a keep-alive.
func (s *SSEWriter) WriteComment(text string) error {
	if err := s.write([]byte(": " + text + "\n\n")); err != nil {
		return fmt.Errorf("writing keep-alive: %w", err)
	}
	return nil
}

// write writes and flushes p under a write deadline, cleared afterwards so
// that an idle stream stays open.
func (s *SSEWriter) write(p []byte) error {
	deadline := s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout)) == nil
	var err error
	if len(p) > 0 {
		_, err = s.w.Write(p)
	}
	if err == nil {
		err = s.flush()
	}
	if deadline && err == nil {
		err = s.rc.SetWriteDeadline(time.Time{})
	}
	return err
}

func (s *SSEWriter) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// appendSSEEvent encodes one event, with an id line when hasID (an empty
// one resets the reader's last event id); data containing newlines becomes
// several data lines, which the reader joins back.
func appendSSEEvent(b *bytes.Buffer, id string, hasID bool, typ string, data []byte) {
	if hasID {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	if typ != "" {
		b.WriteString("event: ")
		b.WriteString(typ)
		b.WriteByte('\n')
	}
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		b.WriteString("data: ")
		b.Write(bytes.TrimSuffix(line, []byte{'\r'}))
		b.WriteByte('\n')
		if !more {
			break
		}
		data = rest
	}
	b.WriteByte('\n')
}
