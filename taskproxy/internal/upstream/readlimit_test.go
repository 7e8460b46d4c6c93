package upstream

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A body over the limit, JSON or a stream of events, fails with the size
// read and the limit; many small events do not add up to it.
func TestReadMessagesLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	big := strings.Repeat("x", 3000)
	msg := func(text string) string {
		return `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
	}
	tests := []struct {
		name, contentType, body string
		wantSize                int64 // 0: no error
	}{
		{"JSON within", "application/json", msg("ok"), 0},
		{"JSON over", "application/json", msg(big), int64(len(msg(big)))},
		{"SSE within", "text/event-stream", "data: " + msg("ok") + "\n\n", 0},
		{"SSE one long line", "text/event-stream", "data: " + msg(big) + "\n\n", int64(len("data: "+msg(big)) + 2)},
		{"SSE many data lines", "text/event-stream", strings.Repeat("data: "+strings.Repeat("y", 90)+"\n", 50) + "\n", 50*97 + 1},
		{"SSE cut off while over", "text/event-stream", "data: " + msg(big), int64(len("data: "+msg(big)) + 1)},
		{"SSE small events add up fine", "text/event-stream", strings.Repeat("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n", 100) + "data: " + msg("ok") + "\n\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &Response{Status: 200, Header: http.Header{"Content-Type": {tt.contentType}}, Body: io.NopCloser(strings.NewReader(tt.body))}
			var pos StreamPosition
			err := ReadMessages(resp, &pos, limit, func(m *jsonrpc.Message) (bool, error) { return m.IsResponse(), nil })
			if tt.wantSize == 0 {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if _, ok := errors.AsType[*TooLargeError](err); !ok {
				t.Fatalf("err = %v, want result too large", err)
			}
			want := fmt.Sprintf("result too large (%d bytes, limit %d)", tt.wantSize, limit)
			if err.Error() != want {
				t.Errorf("err = %q, want %q", err, want)
			}
		})
	}
}
