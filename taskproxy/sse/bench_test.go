package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// benchEvent is a typical task-augmented call, as events carry them.
var benchEvent = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":1,"label":"x"},"_meta":{"progressToken":"p"},"task":{"ttl":60000}}}`)

func BenchmarkWriteEvent(b *testing.B) {
	w := &Writer{w: io.Discard, rc: http.NewResponseController(httptest.NewRecorder()), timeout: DefaultWriteTimeout}
	data := benchEvent
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.WriteEvent("", data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	var stream bytes.Buffer
	for range 100 {
		stream.WriteString("event: message\ndata: ")
		stream.Write(benchEvent)
		stream.WriteString("\n\n")
	}
	b.SetBytes(int64(stream.Len()))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream.Bytes()))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// BenchmarkDecode decodes one large result, as an upstream streams a tool's
// answer: a 1 MiB data line handed over in the 32 KiB pieces a proxy
// copies with.
func BenchmarkDecode(b *testing.B) {
	stream := []byte("event: message\ndata: " + `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("x"), 1<<20)) + `"}]}}` + "\n\n")
	emit := func(*Event) error { return nil }
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder(MaxEvent)
		for p := stream; len(p) > 0; {
			n := min(32<<10, len(p))
			if err := d.Write(p[:n], emit); err != nil {
				b.Fatal(err)
			}
			p = p[n:]
		}
		if err := d.End(emit); !errors.Is(err, io.EOF) {
			b.Fatal(err)
		}
	}
}
