package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// Long-lived answers (tasks/result, subscriptions/listen) against reloads,
// stops and clients that stop reading.

// floodingUpstream answers tools/call with an endless event stream of large
// progress notifications for the call's progress token; sent counts the
// bytes it wrote.
func floodingUpstream(t *testing.T, sent *atomic.Int64) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case m.Method == "initialize":
			out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"0"}}`))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
			return
		case m.Method != "tools/call":
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		pad := strings.Repeat("p", 32<<10)
		for i := 1; r.Context().Err() == nil; i++ {
			ev := fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":%d,\"message\":%q}}\n\n",
				m.Params.Meta.ProgressToken, i, pad)
			n, err := io.WriteString(w, ev)
			if err != nil {
				return
			}
			sent.Add(int64(n))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// A client that opens a tasks/result stream and never reads it (a small
// receive buffer, a flood of progress) does not keep caddy stop from
// finishing; the stream's writes time out. Caddy runs without a
// grace_period and without its write idle timeout here (as behind a proxy
// that times out slow clients itself), so nothing else ends the stream.
func TestSlowResultReaderDoesNotBlockStop(t *testing.T) {
	t.Parallel()
	var sent atomic.Int64
	upAddr := floodingUpstream(t, &sent)
	home := t.TempDir()
	gw := &gateway{t: t, home: home, addr: freeAddr(t), adminAddr: freeAddr(t)}
	config := home + "/Caddyfile"
	cfg := fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
	servers {
		timeouts {
			write_idle -1s
		}
	}
}

http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s/store
		tool flood optional
	}
	reverse_proxy /mcp* %s
}
`, gw.adminAddr, gw.port(), home, upAddr)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.proc = startProcessEnv(t, gw.env(), gw.addr, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
	c := newRPCClient(t, "http://"+gw.addr+"/mcp")
	c.initialize("")
	m := c.call("tools/call", map[string]any{"name": "flood", "arguments": map[string]any{},
		"task": map[string]any{"ttl": 600000}, "_meta": map[string]any{"progressToken": "flood-1"}})
	if m.Error != nil {
		t.Fatalf("tools/call: %+v", m.Error)
	}
	var created struct {
		Task v2025Task `json:"task"`
	}
	if err := json.Unmarshal(m.Result, &created); err != nil || created.Task.TaskID == "" {
		t.Fatalf("create answered %s", m.Result)
	}

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = setSocketOption(fd, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", gw.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":99,"method":"tasks/result","params":{"taskId":%q}}`, created.Task.TaskID)
	req := fmt.Sprintf("POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: %d\r\n\r\n%s", gw.addr, len(body), body)
	if c.session != "" {
		req = strings.Replace(req, "\r\n\r\n", "\r\nMcp-Session-Id: "+c.session+"\r\n\r\n", 1)
	}
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	// Far more than any socket buffers hold has gone by the stream it
	// relays: its writes now block on the client.
	waitFor(t, 60*time.Second, "the upstream to send 128 MiB of progress", func() bool { return sent.Load() > 16<<20 })

	// caddy stop answers once Caddy stopped its servers; the process exits
	// then.
	stop := exec.Command(caddyBinary, "stop", "--address", gw.adminAddr)
	stop.Env = append(os.Environ(), gw.env()...)
	stop.WaitDelay = time.Second
	if err := stop.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop.Process.Kill(); _ = stop.Wait() }()
	select {
	case <-gw.proc.done:
	case <-time.After(90 * time.Second):
		t.Fatal("caddy did not stop: a tasks/result stream whose client does not read holds it")
	}
}

// A tasks/result stream open during caddy reload ends with an event that
// carries an id and a retry delay; reconnecting with that id as
// Last-Event-ID continues the answer up to the task's result. A JSON
// tasks/result waiting meanwhile gets 503 with Retry-After, not an empty 200.
func TestReloadEndsResultStreamResumably(t *testing.T) {
	t.Parallel()
	// At debug level: the second wait on the same state is audited there,
	// and its line is how the test knows both waits are in the gateway.
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools, GlobalOptions: "log {\n\tlevel DEBUG\n}"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 8}, 60000)
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r-1"`), "tasks/result", map[string]string{"taskId": task.TaskID})
	resp, err := httpClient.Do(c.newRequest(context.Background(), body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("tasks/result answered %s", ct)
	}
	events := make(chan *sse.Event, 100)
	go func(body io.Reader) {
		defer close(events)
		r := sse.NewReader(body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			events <- ev
		}
	}(resp.Body)
	// A client that takes JSON only waits on the same task meanwhile.
	jsonBody, _ := jsonrpc.RequestBytes(json.RawMessage(`"j-1"`), "tasks/result", map[string]string{"taskId": task.TaskID})
	jsonReq := c.newRequest(context.Background(), jsonBody)
	jsonReq.Header.Set("Accept", "application/json")
	type answer struct {
		resp *http.Response
		data []byte
	}
	jsonDone := make(chan answer, 1)
	go func() {
		resp, err := httpClient.Do(jsonReq)
		if err != nil {
			jsonDone <- answer{}
			return
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		jsonDone <- answer{resp, data}
	}()
	// Both waits are in the gateway once it logged both retrievals.
	waitFor(t, 20*time.Second, "both tasks/result requests to arrive", func() bool {
		return strings.Count(gw.logs(), `"task retrieved"`) >= 2
	})

	gw.reload(v2025Tools + "default_ttl 20m")
	got := <-jsonDone
	if got.resp == nil {
		t.Fatal("JSON tasks/result: no answer")
	}
	if m, err := jsonrpc.Parse(got.data); got.resp.StatusCode != http.StatusServiceUnavailable || got.resp.Header.Get("Retry-After") == "" ||
		err != nil || m.Error == nil {
		t.Errorf("JSON tasks/result during the reload: HTTP %d, Retry-After %q, body %q; want 503 with Retry-After and a JSON-RPC error",
			got.resp.StatusCode, got.resp.Header.Get("Retry-After"), got.data)
	}
	var last *sse.Event
	for ev := range events {
		if ev.HasData && strings.Contains(ev.Data, `"id":"r-1"`) {
			t.Fatalf("the task ended before the reload ended the stream: %s", ev.Data)
		}
		last = ev
	}
	if last == nil || last.ID == "" || last.Retry == "" {
		t.Fatalf("the stream ended with %+v, want an event with an id and retry", last)
	}

	req, _ := http.NewRequest(http.MethodGet, gw.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", last.ID)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	s := c.openRequest(req, nil)
	defer s.close()
	m := s.response("tasks/result", json.RawMessage(`"r-1"`))
	if m == nil || m.Error != nil || !strings.Contains(string(m.Result), "content") {
		t.Fatalf("resumed tasks/result answered %+v", m)
	}
}

// One principal holds at most 16 long-lived answers; the next one gets
// HTTP 429 with a JSON-RPC error that names the limit.
func TestStreamsPerPrincipalCapped(t *testing.T) {
	t.Parallel()
	c, _, _ := v2025Setup(t, "")
	task := c.createTask("slow_compute", map[string]any{"seconds": 60}, 60000)
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`1`), "tasks/result", map[string]string{"taskId": task.TaskID})
	for i := range 16 {
		s := c.open(context.Background(), body)
		defer s.close()
		if s.status != http.StatusOK {
			t.Fatalf("stream %d: HTTP %d", i+1, s.status)
		}
	}
	resp := c.post(context.Background(), body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	m, err := jsonrpc.Parse(data)
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || m.Error == nil || m.Error.Code > -32000 || m.Error.Code < -32099 || !strings.Contains(m.Error.Message, "16") {
		t.Fatalf("stream 17: HTTP %d %s", resp.StatusCode, data)
	}
}
