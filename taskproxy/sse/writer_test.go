package sse

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWriter(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := Start(rec, 0)
	if err := w.WriteEvent("", []byte("line1\nline2")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteComment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	if got := rec.Header().Get("Content-Type"); got != "text/event-stream" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := rec.Header().Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering = %q", got)
	}
	r := NewReader(rec.Body)
	e, err := r.Next()
	if err != nil || e.Data != "line1\nline2" {
		t.Fatalf("read back %+v, %v", e, err)
	}
}

// A client that stops reading makes the event write fail within the write
// timeout instead of blocking the handler forever.
func TestWriterDeadline(t *testing.T) {
	t.Parallel()
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse := Start(w, 200*time.Millisecond)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if err := sse.WriteEvent("", chunk); err != nil {
				done <- err
				return
			}
		}
	}))
	defer srv.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = setReceiveBuffer(fd, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select { // never read: the handler's write must give up
	case err := <-done:
		if !strings.Contains(err.Error(), "writing event") {
			t.Errorf("error %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the event write blocked on a client that does not read")
	}
}
