package sse

import (
	"bytes"
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
