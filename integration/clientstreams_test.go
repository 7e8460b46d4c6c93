package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// Subscribers that stop reading: their streams must not block other
// subscribers, must not hold their stream slots for ever, and must not
// make Caddy's memory grow without bound.

// stalledDirectives: big_result is always a task, so that a finished task
// carries a large result that every notification about it inlines.
const stalledDirectives = v2025Tools + hmacAuth + `
tool big_result required
tool slow_echo optional
task_after 200ms
rate_limit off
max_active_per_principal off
`

// stalledResultBytes is the size of each big task's result.
const stalledResultBytes = 2 << 20

// streamSlots is the gateway's limit of open streams per principal
// (gate.MaxStreamsPerOwner).
const streamSlots = 16

// TestClientStalledSubscribers: one principal fills its stream slots with
// subscriptions/listen streams on connections that never read, each
// watching four finished tasks with 2 MiB results (8 MiB of notifications
// at once). A further stream of theirs is refused (429); another
// principal's subscription gets its notifications meanwhile; the stalled
// streams end when a write outlasts the gateway's write deadline (10 s), so
// their slots come back, and Caddy's goroutines with them.
func TestClientStalledSubscribers(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: stalledDirectives})
	stalled, reader := hmacToken(t, "stalled", "t1"), hmacToken(t, "reader", "t1")

	sc := newV2026Client(t, gw.URL, true)
	sc.header.Set("Authorization", "Bearer "+stalled)
	var ids []string
	for range 4 {
		res := sc.ok("tools/call", map[string]any{"name": "big_result", "arguments": map[string]any{"bytes": stalledResultBytes}})
		if str(res["resultType"]) != "task" {
			t.Fatalf("big_result answered %v, want a task", res)
		}
		ids = append(ids, str(res["taskId"]))
	}
	for _, id := range ids {
		sc.waitStatus(id, "completed")
	}
	idle := figures(t, gw)

	headers := v2026Headers("subscriptions/listen", "")
	headers["Authorization"] = "Bearer " + stalled
	listen := rawPost(headers, v2026Body(1, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}}))
	conns := make([]net.Conn, streamSlots)
	for i := range conns {
		conns[i] = dialRaw(t, gw.addr, 4096)
		if _, err := io.WriteString(conns[i], listen); err != nil {
			t.Fatal(err)
		}
		// Only the answer's head is read (a few kilobytes at most): the
		// stream holds its slot before the next one opens.
		_ = conns[i].SetReadDeadline(time.Now().Add(promptBound))
		resp, err := http.ReadResponse(bufio.NewReaderSize(conns[i], 4096), nil) //nolint:bodyclose // the stream stays unread on purpose; closing its body would drain it, the test closes the connection
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("stalled stream %d: %v %v, want HTTP 200", i, resp, err)
		}
		_ = conns[i].SetReadDeadline(time.Time{})
	}
	waitFor(t, 30*time.Second, "the stalled streams to hold every slot of their principal", func() bool { return listenRefused(t, gw.URL, stalled) })
	full := time.Now()
	held := figures(t, gw)

	// Another principal is served meanwhile, streams included.
	rc := newV2026Client(t, gw.URL, true)
	rc.header.Set("Authorization", "Bearer "+reader)
	res := rc.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "reader"}})
	if err := listenUntilEnded(gw.URL, reader, str(res["taskId"])); err != nil {
		t.Errorf("another principal's subscription while %d streams stall: %v", streamSlots, err)
	}
	served := servedMeanwhile(t, gw.URL, reader, 2)

	// Nothing reads the stalled connections: their streams end on the
	// gateway's write deadline alone, and give back every slot.
	waitFor(t, 60*time.Second, "every stalled stream to end and give back its slot", func() bool { return slotsFree(t, gw.URL, stalled, streamSlots) })
	ended := time.Since(full)
	closed := closeAll(conns)
	var after caddyFigures
	waitFor(t, 30*time.Second, "Caddy's goroutines to come back down", func() bool {
		after = figures(t, gw)
		return after.goroutines <= idle.goroutines+20
	})
	t.Logf("stalled subscribers: %d listen streams (%d MiB of notifications each) never read; the next refused with 429; %d of 2 calls of each version and another principal's subscription served meanwhile; every stalled stream ended, its slot back, %s after they filled the slots; Caddy closed %d of the connections",
		streamSlots, 4*stalledResultBytes>>20, served, ended.Round(100*time.Millisecond), closed)
	t.Logf("stalled subscribers: Caddy idle %s; with the stalled streams %s; after %s", idle, held, after)
	if served != 2 {
		t.Errorf("%d of 2 calls of each version completed beside the stalled streams, want all", served)
	}
	if closed != streamSlots {
		t.Errorf("Caddy closed %d of %d stalled streams, want all", closed, streamSlots)
	}
}

// slotsFree opens n streams at once as token and reports whether none was
// refused: every one is open (or refused) before any closes. It closes
// them all.
func slotsFree(t *testing.T, url, token string, n int) bool {
	t.Helper()
	var mu sync.Mutex
	var opened, done sync.WaitGroup
	refused, failed := 0, 0
	release := make(chan struct{})
	opened.Add(n)
	for range n {
		done.Go(func() {
			resp, cancel, err := openListen(url, token)
			mu.Lock()
			switch {
			case err != nil:
				failed++
			case resp.StatusCode == http.StatusTooManyRequests:
				refused++
			}
			mu.Unlock()
			opened.Done()
			if err != nil {
				return
			}
			defer cancel()
			defer resp.Body.Close()
			<-release
		})
	}
	opened.Wait() // each bounded by promptBound
	close(release)
	done.Wait()
	return refused == 0 && failed == 0
}

// listenUntilEnded subscribes to task id as token and reads the stream
// until the task's terminal notification, within 30 s.
func listenUntilEnded(url, token, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(v2026Body(1, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range v2026Headers("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("subscriptions/listen: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("subscriptions/listen: HTTP %d", resp.StatusCode)
	}
	events := sse.NewReader(resp.Body)
	for {
		ev, err := events.Next()
		if err != nil {
			return fmt.Errorf("the stream ended before the task did: %w", err)
		}
		m, err := jsonrpc.Parse([]byte(ev.Data))
		if !ev.HasData || err != nil || m.Method != "notifications/tasks" {
			continue
		}
		var p struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Status == "completed" || p.Status == "failed" || p.Status == "cancelled" {
			return nil
		}
	}
}

// stalledJSONBytes is the result of the stalled JSON answers: more than
// the kernel's largest socket send buffer (4 MiB by default), which would
// otherwise take a whole answer and let its handler return.
const stalledJSONBytes = 6 << 20

// TestClientStalledResultJSON: tasks/result of a finished 2025-11-25 task
// answered as plain JSON (the client accepts no event stream), 6 MiB, on
// connections that never read. Each answer is cut off once a piece of it
// waits longer than the write timeout (10 s), so its handler ends and Caddy
// closes the connection without the client doing anything; other clients
// are served meanwhile.
func TestClientStalledResultJSON(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: stalledDirectives})
	stalled, reader := hmacToken(t, "stalled", "t1"), hmacToken(t, "reader", "t1")
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+stalled)
	c.initialize("")
	task := c.createTask("big_result", map[string]any{"bytes": stalledJSONBytes}, 600000)
	waitFor(t, 30*time.Second, "the big task to complete", func() bool { return c.getTask(task.TaskID).Status == "completed" })
	idle := figures(t, gw)

	const n = 16
	req := rawPost(map[string]string{"Accept": "application/json", "Authorization": "Bearer " + stalled,
		"Mcp-Session-Id": c.session, "Mcp-Protocol-Version": "2025-11-25"},
		fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":%q}}`, task.TaskID))
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialRaw(t, gw.addr, 4096)
		if _, err := io.WriteString(conns[i], req); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	waitFor(t, 30*time.Second, "every stalled answer to begin", func() bool { return answersWriting(t, gw) == n })
	held := figures(t, gw)
	served := servedMeanwhile(t, gw.URL, reader, 2)
	// Nothing reads the stalled connections: the answers end on the write
	// timeout alone (read before they end, an answer would go on).
	waitFor(t, 60*time.Second, "the stalled answers to be cut off", func() bool { return answersWriting(t, gw) == 0 })
	ended := time.Since(began)
	after := figures(t, gw)
	closed := closeAll(conns)
	t.Logf("stalled JSON results: %d tasks/result answers of %d MiB never read, all cut off within %s, Caddy closed %d of the connections; %d of 2 calls of each version served meanwhile",
		n, stalledJSONBytes>>20, ended.Round(100*time.Millisecond), closed, served)
	t.Logf("stalled JSON results: Caddy idle %s; answers begun %s; after %s", idle, held, after)
	if served != 2 {
		t.Errorf("%d of 2 calls of each version completed beside the stalled answers, want all", served)
	}
	if closed != n {
		t.Errorf("Caddy closed %d of %d connections whose client stopped reading, want all", closed, n)
	}
}

// answersWriting counts Caddy's goroutines writing a JSON answer, from its
// admin endpoint's goroutine dump.
func answersWriting(t *testing.T, gw *gateway) int {
	t.Helper()
	resp, err := httpClient.Get("http://" + gw.adminAddr + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dump, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(dump), "internal/wire.WriteJSON(")
}
