package taskproxy

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

// trickle is a body that hands out at most one byte a read and records
// the largest buffer it was given.
type trickle struct {
	data    []byte
	largest int
}

func (b *trickle) Read(p []byte) (int, error) {
	b.largest = max(b.largest, len(p))
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:1], b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *trickle) Close() error { return nil }

// A body is read into memory as it arrives, not into a buffer of the
// length the client declares: one that declares max_body and trickles a
// few bytes holds a few bytes. Bodies read whole are put back for the
// next handler; one shorter than its declared length is an error.
func TestReadBodyGrowsAsBytesArrive(t *testing.T) {
	t.Parallel()
	const max = 4 << 20
	tests := []struct {
		name     string
		body     string
		declared int64
		wantErr  bool
	}{
		{"small, declared", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 40, false},
		{"undeclared", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, -1, false},
		{"declares max_body, sends a little", `{"jsonrpc":"2.0"`, max, true},
		{"declared small, sends less", `{"jsonrpc"`, 40, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := &trickle{data: []byte(tt.body)}
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Body, r.ContentLength = body, tt.declared
			data, err := readBody(r, max, new(upstream.ReplayBody))
			if (err != nil) != tt.wantErr {
				t.Fatalf("readBody: %v, want error %v", err, tt.wantErr)
			}
			if body.largest > bodyChunk {
				t.Errorf("a read into %d bytes, want at most %d whatever the client declares", body.largest, bodyChunk)
			}
			if tt.wantErr {
				return
			}
			again, _ := io.ReadAll(r.Body)
			if !bytes.Equal(data, []byte(tt.body)) || !bytes.Equal(again, data) || r.ContentLength != int64(len(data)) {
				t.Errorf("read %q, put back %q (length %d), want %q", data, again, r.ContentLength, tt.body)
			}
		})
	}
}

// countingBody counts the Read calls made on a request body.
type countingBody struct {
	io.ReadCloser
	reads int
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads++
	return b.ReadCloser.Read(p)
}

// A body of declared length that a real server hands over is read in one
// Read call: Caddy wraps request bodies in a reader that arms and clears
// a read deadline around every call, so each call more costs two.
func TestReadBodyOneRead(t *testing.T) {
	t.Parallel()
	body := `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"0123456789abcdefghijkl"}}`
	reads := make(chan int, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		counted := &countingBody{ReadCloser: r.Body}
		r.Body = counted
		data, err := readBody(r, 1<<20, new(upstream.ReplayBody))
		if err != nil || string(data) != body {
			t.Errorf("readBody = %q, %v", data, err)
		}
		reads <- counted.reads
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if n := <-reads; n != 1 {
		t.Errorf("the body was read in %d calls, want 1", n)
	}
}
