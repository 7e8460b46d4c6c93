package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// watchBoundDirectives: a small bound on the task ids one principal's
// listens watch together.
const watchBoundDirectives = v2025Tools + hmacAuth + `
tool big_result required
task_after 200ms
max_watched_tasks_per_principal 3
`

// TestListenWatchedTasksBound: through the real Caddy, the task ids one
// principal's open subscriptions/listen streams watch count against
// max_watched_tasks_per_principal together. Ids the caller may not see do
// not count; a listen past the bound is refused with HTTP 400 and -32602
// naming the limit; another principal has a bound of its own; a closed
// stream gives its ids back.
func TestListenWatchedTasksBound(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: watchBoundDirectives})
	alice, bob := hmacToken(t, "alice", "t1"), hmacToken(t, "bob", "t1")
	create := func(token string, n int) []string {
		c := newV2026Client(t, gw.URL, true)
		c.header.Set("Authorization", "Bearer "+token)
		var ids []string
		for range n {
			res := c.ok("tools/call", map[string]any{"name": "big_result", "arguments": map[string]any{"bytes": 1024}})
			if str(res["resultType"]) != "task" {
				t.Fatalf("big_result answered %v, want a task", res)
			}
			ids = append(ids, str(res["taskId"]))
		}
		return ids
	}
	a, b := create(alice, 4), create(bob, 1)

	first := watch(t, gw.URL, alice, a[:2])
	first.wantAck(t, 2)
	watch(t, gw.URL, alice, []string{b[0], a[2]}).wantAck(t, 1) // bob's task is not alice's to watch
	refused := watch(t, gw.URL, alice, a[3:])
	if refused.status != http.StatusBadRequest || refused.err == nil || refused.err.Code != jsonrpc.CodeInvalidParams ||
		!strings.Contains(refused.err.Message, "limit of 3") {
		t.Fatalf("a listen past the bound answered HTTP %d %+v, want 400 with -32602 naming the limit of 3", refused.status, refused.err)
	}
	t.Logf("refused: %s", refused.err.Message)
	watch(t, gw.URL, bob, b).wantAck(t, 1)

	first.close()
	waitFor(t, 30*time.Second, "the closed stream's ids to be given back", func() bool {
		w := watch(t, gw.URL, alice, a[3:])
		defer w.close()
		return w.ack != nil
	})
}

// watched is the answer to a listen: its acknowledged ids on an open
// stream, or its error.
type watched struct {
	status int
	ack    []string
	err    *jsonrpc.Error
	close  func()
}

func (w watched) wantAck(t *testing.T, n int) {
	t.Helper()
	if w.ack == nil || len(w.ack) != n {
		t.Fatalf("listen answered HTTP %d, ack %v, error %+v; want %d ids acknowledged", w.status, w.ack, w.err, n)
	}
}

// watch opens a listen for ids as token and reads its acknowledgement or
// its error; the stream stays open until close (or the test's end).
func watch(t *testing.T, url, token string, ids []string) watched {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(v2026Body(1, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range v2026Headers("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req) //nolint:bodyclose // w.close closes it, at the latest in the test's cleanup
	if err != nil {
		cancel()
		t.Fatalf("subscriptions/listen: %v", err)
	}
	w := watched{status: resp.StatusCode, close: func() { cancel(); resp.Body.Close() }}
	t.Cleanup(w.close)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Error == nil {
			t.Fatalf("listen answered HTTP %d %q, neither a stream nor an error", resp.StatusCode, body)
		}
		w.err = m.Error
		return w
	}
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		if err != nil {
			t.Fatalf("the listen stream ended before its acknowledgement: %v", err)
		}
		if !ev.HasData || ev.Data == "" {
			continue
		}
		m, err := jsonrpc.Parse([]byte(ev.Data))
		if err != nil || m.Method != "notifications/subscriptions/acknowledged" {
			t.Fatalf("first message on the listen stream %q, want the acknowledgement", ev.Data)
		}
		var p struct {
			Notes struct {
				TaskIDs []string `json:"taskIds"`
			} `json:"notifications"`
		}
		_ = json.Unmarshal(m.Params, &p)
		w.ack = p.Notes.TaskIDs
		if w.ack == nil {
			w.ack = []string{}
		}
		return w
	}
}
