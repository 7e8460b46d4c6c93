package sse

import (
	"bytes"
	"slices"
)

// Decoder decodes an event stream handed to it in pieces, as an
// http.ResponseWriter receives one: the events are those a Reader of the
// same bytes returns, with the same limit, without a goroutine to pull
// them, but for their Raw, which a Decoder does not keep: it serves a
// reader of the messages, not a proxy passing events on (a copy of each
// event less). A line past the limit is counted, not kept.
type Decoder struct {
	d lineDecoder
	// line is the current line so far, unless it is past the limit:
	// then only its length counts (skipped).
	line    []byte
	skipped int
	// skipping is set while the current line is past the limit.
	skipping bool
	// cr is set when the last byte was a CR ending a line: an LF right
	// after it belongs to the same line end.
	cr  bool
	err error
}

// NewDecoder returns a decoder that refuses an event of more than limit
// bytes (at most MaxEvent) with a *TooLargeError.
func NewDecoder(limit int) *Decoder {
	return &Decoder{d: lineDecoder{limit: min(limit, MaxEvent), noRaw: true}}
}

// Write takes the next bytes of the stream and hands each event they
// complete to emit, in order. The first error, the decoder's or emit's,
// stops the decoding: Write and End return it from then on.
func (s *Decoder) Write(p []byte, emit func(*Event) error) error {
	for len(p) > 0 && s.err == nil {
		if s.cr {
			s.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			s.take(p)
			return s.err
		}
		s.cr = p[i] == '\r'
		if len(s.line) == 0 && !s.skipping {
			// The whole line is in p: read it there, not copied.
			s.endLine(p[:i], emit)
		} else {
			s.take(p[:i])
			s.endLine(s.line, emit)
		}
		p = p[i+1:]
	}
	return s.err
}

// End is the end of the stream: it returns io.EOF between events, as Reader
// does, io.ErrUnexpectedEOF or a *TooLargeError within one, or the error
// that stopped the decoding.
func (s *Decoder) End(emit func(*Event) error) error {
	if s.err != nil {
		return s.err
	}
	if s.skipping || len(s.line) > 0 {
		// A last line without its end is a line, as Reader reads it.
		if s.endLine(s.line, emit); s.err != nil {
			return s.err
		}
	}
	s.err = s.d.end()
	return s.err
}

// Pending returns the bytes of the event under way: its lines so far,
// each with its end, and the current line. A caller that cannot wait for
// an event past the limit to end (one that never does) can give up on it
// by this count.
func (s *Decoder) Pending() int {
	if s.skipping {
		return s.d.size + s.skipped
	}
	return s.d.size + len(s.line)
}

// take adds p to the current line, or counts it once the line is past the
// limit.
func (s *Decoder) take(p []byte) {
	if s.skipping {
		s.skipped += len(p)
		return
	}
	if len(p) > cap(s.line)-len(s.line) {
		// Doubling: append grows a long line by a quarter at a time,
		// copying it over and over as it comes in pieces.
		s.line = slices.Grow(s.line, max(len(p), len(s.line)))
	}
	s.line = append(s.line, p...)
	// A blank line, which ends an event, is never skipped.
	if len(s.line) > 0 && s.d.overLimit(len(s.line)) {
		s.skipping, s.skipped = true, len(s.line)
		if !s.d.started && bytes.HasPrefix(s.line, utf8BOM) {
			s.skipped -= len(utf8BOM)
		}
		s.line = s.line[:0]
	}
}

// endLine hands the current line, line (the kept part of it, unless it is
// skipped), to the rules and emits what it completes.
func (s *Decoder) endLine(line []byte, emit func(*Event) error) {
	if s.skipping {
		s.d.counted(s.skipped)
		s.skipping, s.skipped = false, 0
		return
	}
	ev, err := s.d.line(line)
	s.line = s.line[:0]
	switch {
	case err != nil:
		s.err = err
	case ev != nil:
		s.err = emit(ev)
	}
}
