package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// A load balancer between the gateway and a 2025-11-25 upstream cuts the
// call's event stream after its first progress event (as an idle timeout
// does); the upstream, with an event store, runs the call on. The gateway
// resumes the stream with GET and Last-Event-ID, and the task completes
// with the tool's real result.
func TestV2025BrokenStreamResumed(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{EventStore: true})
	resumes := &resumeRecorder{next: up}
	srv := httptest.NewServer(resumes)
	t.Cleanup(srv.Close)
	lb := startCuttingProxy(t, strings.TrimPrefix(srv.URL, "http://"), []byte("notifications/progress"))
	gw := startGateway(t, gatewayOptions{Upstream: lb.addr, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")

	m := c.call("tools/call", map[string]any{
		"name": "slow_compute", "arguments": map[string]any{"seconds": 2, "label": "through a cut"},
		"task": map[string]any{"ttl": 60000}, "_meta": map[string]any{"progressToken": "tok-1"},
	})
	var created struct {
		Task v2025Task `json:"task"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("create: %s / %+v", m.Result, m.Error)
	}
	m = c.call("tasks/result", map[string]string{"taskId": created.Task.TaskID})
	if m.Error != nil || !strings.Contains(string(m.Result), "Computed through a cut in 2s") {
		t.Fatalf("tasks/result = %s / %+v, want the tool's result\ncaddy:\n%s", m.Result, m.Error, tail(gw.logs(), 3000))
	}
	if got := c.getTask(created.Task.TaskID); got.Status != "completed" {
		t.Errorf("task %+v, want completed", got)
	}
	if !lb.cut.Load() {
		t.Fatal("the proxy cut no stream: the test proved nothing")
	}
	if ids := resumes.seen(); len(ids) == 0 {
		t.Error("the upstream saw no GET with Last-Event-ID")
	}
	if n := up.Calls("slow_compute"); n != 1 {
		t.Errorf("the upstream ran slow_compute %d times, want once (resumed, not called again)", n)
	}
}

// On 2026-07-28 there is no session to resume a stream on: a call whose
// stream a load balancer cuts fails, and the task says the upstream's
// stream broke, not that something was aborted.
func TestV2026BrokenStreamFails(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{EventStore: true})
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	lb := startCuttingProxy(t, strings.TrimPrefix(srv.URL, "http://"), []byte("notifications/progress"))
	// Converted to a task before the first progress event.
	gw := startGateway(t, gatewayOptions{Upstream: lb.addr, Directives: "task_after 50ms"})
	c := newV2026Client(t, gw.URL, true)
	c.meta = map[string]any{"progressToken": "p-1"}
	res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 2, "label": "cut"}})
	id := str(res["taskId"])
	if id == "" {
		t.Fatalf("no task: %v", res)
	}
	done := c.waitStatus(id, "failed")
	if !lb.cut.Load() {
		t.Fatal("the proxy cut no stream: the test proved nothing")
	}
	text, _ := json.Marshal(done)
	if !strings.Contains(string(text), "event stream broke before the response to the call") {
		t.Errorf("failed task %s, want it to say the upstream's event stream broke", text)
	}
}

// resumeRecorder records the Last-Event-ID of each GET the upstream gets.
type resumeRecorder struct {
	next http.Handler
	mu   sync.Mutex
	ids  []string
}

func (r *resumeRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if id := req.Header.Get("Last-Event-ID"); req.Method == http.MethodGet && id != "" {
		r.mu.Lock()
		r.ids = append(r.ids, id)
		r.mu.Unlock()
	}
	r.next.ServeHTTP(w, req)
}

func (r *resumeRecorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// cuttingProxy is a TCP proxy in front of an upstream that closes, once,
// the connection of the first event stream that carries marker, right
// after the event marker is in (its blank line), as a load balancer with
// an idle timeout does: the client sees the stream break mid-answer, the
// upstream sees its client go away.
type cuttingProxy struct {
	addr   string
	target string
	marker []byte
	cut    atomic.Bool
}

func startCuttingProxy(t *testing.T, target string, marker []byte) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cuttingProxy{addr: ln.Addr().String(), target: target, marker: marker}
	var conns sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Wait()
	})
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.serve(t, client) })
		}
	}()
	return p
}

// serve pipes one connection to the target, cutting it as described.
func (p *cuttingProxy) serve(t *testing.T, client net.Conn) {
	t.Helper()
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		t.Errorf("proxy dialing the upstream: %v", err)
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	}()
	// What the upstream sent on this connection so far, while no stream
	// was cut: responses of a keep-alive connection one after another.
	var seen []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		chunk := buf[:n]
		if !p.cut.Load() {
			seen = append(seen, chunk...)
			if end := cutPoint(seen, p.marker); end >= 0 && p.cut.CompareAndSwap(false, true) {
				// Forward up to the end of the marked event, then close
				// both sides: the chunk that held it is never finished.
				_, _ = client.Write(chunk[:len(chunk)-(len(seen)-end)])
				return
			}
		}
		if n > 0 {
			if _, werr := client.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				t.Logf("proxy reading the upstream: %v", err)
			}
			return
		}
	}
}

// cutPoint is the offset just past the blank line that ends the first
// event holding marker in an event stream within seen, or -1.
func cutPoint(seen, marker []byte) int {
	head := bytes.Index(seen, []byte("text/event-stream"))
	if head < 0 {
		return -1
	}
	at := bytes.Index(seen[head:], marker)
	if at < 0 {
		return -1
	}
	at += head
	end := bytes.Index(seen[at:], []byte("\n\n"))
	if end < 0 {
		return -1
	}
	return at + end + 2
}
