package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
)

// A large JSON answer is cut off when its client stops reading, and
// delivered whole to one that reads; a small one goes out as before, with
// its Content-Length; the connection serves the next request after a
// large answer (the deadline is cleared).
//
//nolint:paralleltest,tparallel // the cases take their handler's ends from one channel
func TestWriteJSONSlowReader(t *testing.T) {
	t.Parallel()
	// A stalled client is cut off after stalledTimeout; a reading one gets
	// readingTimeout per piece, room for a reader that a loaded machine
	// schedules late (its 4 KiB window takes a 64 KiB piece in many turns).
	const stalledTimeout, readingTimeout = 200 * time.Millisecond, 2 * time.Second
	large := bytes.Repeat([]byte("x"), 4<<20)
	small := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	returned := make(chan struct{}, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, timeout := small, readingTimeout
		switch r.URL.Path {
		case "/large":
			body = large
		case "/large-stalled":
			body, timeout = large, stalledTimeout
		}
		writeJSON(w, http.StatusOK, body, timeout)
		returned <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()

	t.Run("stalled client", func(t *testing.T) {
		conn := dialSmallWindow(t, addr)
		if _, err := io.WriteString(conn, "GET /large-stalled HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-returned:
		case <-time.After(30 * time.Second):
			t.Fatal("the handler still writes to a client that stopped reading")
		}
		// The server closed the connection: reading ends (after what it
		// had sent) instead of waiting.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection is still open after %d bytes", n)
		}
		if n >= int64(len(large)) {
			t.Fatalf("the client got %d bytes, the whole answer: nothing was cut off", n)
		}
	})
	t.Run("reading client, then the next request", func(t *testing.T) {
		conn := dialSmallWindow(t, addr)
		br := bufio.NewReader(conn)
		for i, path := range []string{"/large", "/small"} {
			if i > 0 {
				time.Sleep(readingTimeout + time.Second) // past any deadline left set
			}
			if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := large
			if path == "/small" {
				want = small
				if resp.ContentLength != int64(len(small)) {
					t.Errorf("small answer: Content-Length %d, want %d", resp.ContentLength, len(small))
				}
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: %d bytes (%v), want %d", path, len(got), err, len(want))
			}
			<-returned
		}
	})
}

// dialSmallWindow connects with a small receive buffer, so that the
// server's writes stop soon when the client does not read.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) }); err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
