package wire

import (
	"net/http"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// A client that stops reading a large JSON answer (a finished task's
// result, up to max_result) must not hold its handler, and the answer's
// bytes, until it closes the connection: Caddy sets no write timeout by
// default, and nothing else bounds how many such answers one caller
// stalls. So a large answer is written in pieces, each of which must be
// taken within the write timeout of the gateway's event streams: a client
// that reads, however slowly, gets it all; one that stops is cut off.

// jsonPiece is the size of one piece of a large JSON answer; answers up to
// it are written at once (the socket's buffers take them).
const jsonPiece = 64 << 10

// jsonPieceTimeout is how long one piece may take.
const jsonPieceTimeout = sse.DefaultWriteTimeout

// writeBody writes data as the response body, in pieces each taken within
// timeout when it is large.
func writeBody(w http.ResponseWriter, data []byte, timeout time.Duration) {
	if len(data) <= jsonPiece {
		_, _ = w.Write(data)
		return
	}
	rc := http.NewResponseController(w)
	deadline := func() bool { return rc.SetWriteDeadline(time.Now().Add(timeout)) == nil }
	if !deadline() { // a writer that cannot time out: as before
		_, _ = w.Write(data)
		return
	}
	for len(data) > 0 {
		n := min(len(data), jsonPiece)
		if _, err := w.Write(data[:n]); err != nil {
			return // the connection is broken: the server closes it
		}
		data = data[n:]
		deadline()
	}
	// The last piece may still sit in the writer's buffer.
	if rc.Flush() == nil {
		_ = rc.SetWriteDeadline(time.Time{}) // the connection may serve another request
	}
}
