package upstream

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A worker reading an upstream's event stream keeps the position the rules
// give: an empty id clears the id a resumption would send, a retry that is
// not all digits leaves the delay as it was, and a leading byte order mark
// does not hide the first event.
func TestReadMessagesStreamPosition(t *testing.T) {
	t.Parallel()
	const note = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	tests := []struct {
		name      string
		stream    string
		wantID    string
		wantRetry time.Duration
		wantMsgs  int
	}{
		{"id kept", "id: 5\nretry: 50\ndata: " + note + "\n\n", "5", 50 * time.Millisecond, 1},
		{"empty id resets", "id: 5\ndata: " + note + "\n\nid:\ndata: " + note + "\n\n", "", 0, 2},
		{"bare id resets", "id: 5\ndata: " + note + "\n\nid\ndata: " + note + "\n\n", "", 0, 2},
		{"signed retry ignored", "retry: 50\ndata: " + note + "\n\nretry: +100\ndata: " + note + "\n\n", "", 50 * time.Millisecond, 2},
		{"byte order mark", "\xef\xbb\xbfid: 1\ndata: " + note + "\n\n", "1", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &Response{Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(tt.stream))}
			var pos StreamPosition
			msgs := 0
			err := ReadMessages(resp, &pos, 1<<20, func(*jsonrpc.Message) (bool, error) { msgs++; return false, nil })
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if pos.LastID != tt.wantID || pos.Retry != tt.wantRetry || msgs != tt.wantMsgs {
				t.Errorf("last id %q, retry %s, %d messages; want %q, %s, %d", pos.LastID, pos.Retry, msgs, tt.wantID, tt.wantRetry, tt.wantMsgs)
			}
		})
	}
}
