package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultWriteTimeout bounds the write of one event when Start is given no
// timeout: a client that stops reading must not hold its handler (and with
// it a server's reload or stop) forever. A client that reads slowly but reads
// keeps its stream.
const DefaultWriteTimeout = 10 * time.Second

// Writer writes events to an HTTP response and flushes each one.
type Writer struct {
	w       io.Writer
	rc      *http.ResponseController
	timeout time.Duration
}

// Start sets the event-stream headers, writes status 200 and returns the
// writer, whose every write must finish within writeTimeout (0 means
// DefaultWriteTimeout). X-Accel-Buffering stops intermediaries (nginx and
// the like) from holding events back.
func Start(w http.ResponseWriter, writeTimeout time.Duration) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	w.WriteHeader(http.StatusOK)
	if writeTimeout <= 0 {
		writeTimeout = DefaultWriteTimeout
	}
	s := &Writer{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
	_ = s.write(nil)
	return s
}

// WriteEvent writes one "message" event whose data is the given bytes.
func (s *Writer) WriteEvent(id string, data []byte) error {
	var b bytes.Buffer
	b.Grow(len(data) + 32)
	AppendEvent(&b, id, id != "", "", data)
	if err := s.write(b.Bytes()); err != nil {
		return fmt.Errorf("writing event: %w", err)
	}
	return nil
}

// WriteResumable writes an event with an id, empty data and a reconnection
// delay: the client may reconnect after retry with the id as Last-Event-ID
// (the stream is closed after it, the request not answered).
func (s *Writer) WriteResumable(id string, retry time.Duration) error {
	ev := fmt.Sprintf("id: %s\nretry: %d\ndata: \n\n", id, retry.Milliseconds())
	if err := s.write([]byte(ev)); err != nil {
		return fmt.Errorf("writing resumable event: %w", err)
	}
	return nil
}

// WriteComment writes a comment line, used as a keep-alive.
func (s *Writer) WriteComment(text string) error {
	if err := s.write([]byte(": " + text + "\n\n")); err != nil {
		return fmt.Errorf("writing keep-alive: %w", err)
	}
	return nil
}

// write writes and flushes p under a write deadline, cleared afterwards so
// that an idle stream stays open.
func (s *Writer) write(p []byte) error {
	deadline := s.rc.SetWriteDeadline(time.Now().Add(s.timeout)) == nil
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

func (s *Writer) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// AppendEvent encodes one event, with an id line when hasID (an empty one
// resets the reader's last event id); data containing newlines becomes
// several data lines, which the reader joins back.
func AppendEvent(b *bytes.Buffer, id string, hasID bool, typ string, data []byte) {
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
