package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A large JSON answer is cut off when its client stops reading, and
// delivered whole to one that reads; a small one goes out as before, with
// its Content-Length; the connection serves the next request after a
// large answer (writeJSON clears the deadline it set once the answer is
// out).
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
	// The write deadlines the handler's connection was told of, when
	// writeJSON has returned (before the server's own reset after the
	// handler).
	returned := make(chan deadlineSeen, 8)
	var deadlines *deadlineListener
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, timeout := small, readingTimeout
		switch r.URL.Path {
		case "/large":
			body = large
		case "/large-stalled":
			body, timeout = large, stalledTimeout
		}
		writeJSON(w, http.StatusOK, body, timeout)
		returned <- deadlines.seen(r.RemoteAddr)
	}))
	deadlines = &deadlineListener{Listener: srv.Listener, last: map[string]deadlineSeen{}}
	srv.Listener = deadlines
	srv.Start()
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
		for _, path := range []string{"/large", "/small"} {
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
			seen := <-returned
			if path == "/large" {
				// A deadline left set would cut off the next answer on
				// the connection once it passed.
				if seen.set == 0 || !seen.last.IsZero() {
					t.Fatalf("after the large answer the connection's write deadline is %v (%d set), want cleared", seen.last, seen.set)
				}
			}
		}
	})
}

// deadlineListener accepts connections that note the write deadlines the
// server sets on them, by the client's address.
type deadlineListener struct {
	net.Listener
	mu   sync.Mutex
	last map[string]deadlineSeen
}

// deadlineSeen is what one connection was told of write deadlines: how
// many were set, and the last.
type deadlineSeen struct {
	set  int
	last time.Time
}

func (l *deadlineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c, l: l}, nil
}

func (l *deadlineListener) note(c net.Conn, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.last[c.RemoteAddr().String()]
	seen.set++
	seen.last = t
	l.last[c.RemoteAddr().String()] = seen
}

// seen is what the connection from client (its address) was told.
func (l *deadlineListener) seen(client string) deadlineSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last[client]
}

// deadlineConn is a server's connection that notes its write deadlines.
type deadlineConn struct {
	net.Conn
	l *deadlineListener
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.l.note(c, t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *deadlineConn) SetDeadline(t time.Time) error {
	c.l.note(c, t)
	return c.Conn.SetDeadline(t)
}

// dialSmallWindow connects with a small receive buffer, so that the
// server's writes stop soon when the client does not read.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = setReceiveBuffer(fd, 4096) }); err != nil {
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
