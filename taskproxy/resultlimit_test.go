package taskproxy

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// An upstream answer over Config.MaxResultBytes fails the task with the
// size and the limit, whatever the answer's form.
func TestResultTooLargeFailsTask(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 5000)
	for _, sse := range []bool{false, true} {
		t.Run(fmt.Sprint("sse=", sse), func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{MaxResultBytes: 1000})
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				m, _ := jsonrpc.Parse(mustRead(r))
				data := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`
				if sse {
					w.Header().Set("Content-Type", "text/event-stream")
					data = "data: " + data + "\n\n"
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				_, _ = io.WriteString(w, data)
			})
			rec := waitEnded(t, g, task.Anonymous, createV2025(t, g, next))
			if rec.Status != task.StatusFailed || rec.Error == nil || !strings.HasPrefix(rec.Error.Message, "result too large (") || !strings.Contains(rec.Error.Message, "limit 1000)") || rec.Result != nil {
				t.Errorf("task %s, error %+v; want failed with result too large", rec.Status, rec.Error)
			}
		})
	}
}
