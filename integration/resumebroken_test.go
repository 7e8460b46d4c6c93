package integration

import (
	"bytes"
	"context"
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
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// A load balancer between the gateway and a 2025-11-25 upstream cuts the
// call's event stream after its first progress event (as an idle timeout
// does), or cuts it as it restarts: gone for a second, every connection
// closed, nothing listening. The upstream, with an event store, runs the
// call on. The gateway resumes the stream with GET and Last-Event-ID (a
// GET that finds nothing listening is tried again, later), and the task
// completes with the tool's real result.
func TestV2025BrokenStreamResumed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		down time.Duration
	}{{"idle timeout", 0}, {"proxy restart", time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := upstream.New(upstream.Options{EventStore: true})
			resumes := &resumeRecorder{next: up}
			srv := httptest.NewServer(resumes)
			t.Cleanup(srv.Close)
			lb := startCuttingProxy(t, strings.TrimPrefix(srv.URL, "http://"), []byte("notifications/progress"), tc.down)
			gw := startGateway(t, gatewayOptions{Upstream: lb.addr, Directives: v2025Tools})
			c := newRPCClient(t, gw.URL)
			c.initialize("")

			id := createProgressTask(t, c, 3, "through a cut")
			m := c.call("tasks/result", map[string]string{"taskId": id})
			if m.Error != nil || !strings.Contains(string(m.Result), "Computed through a cut in 3s") {
				t.Fatalf("tasks/result = %s / %+v, want the tool's result\ncaddy:\n%s", m.Result, m.Error, tail(gw.logs(), 3000))
			}
			if got := c.getTask(id); got.Status != "completed" {
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
		})
	}
}

// A long call behind a load balancer that cuts its stream again and again,
// each time after an event the gateway had not seen: more cuts than the
// ten resumes a stream may take in a row without a new event. Each resume
// brings one, so the gateway resumes on, and the task completes with the
// tool's real result.
func TestV2025StreamCutOftenResumedWhileItProgresses(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{EventStore: true})
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	lb := startProxyCuttingEvery(t, strings.TrimPrefix(srv.URL, "http://"), []byte("notifications/progress"))
	gw := startGateway(t, gatewayOptions{Upstream: lb.addr, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")

	id := createProgressTask(t, c, 8, "through many cuts")
	m := c.call("tasks/result", map[string]string{"taskId": id})
	if m.Error != nil || !strings.Contains(string(m.Result), "Computed through many cuts in 8s") {
		t.Fatalf("tasks/result = %s / %+v after %d cuts, want the tool's result\ncaddy:\n%s", m.Result, m.Error, lb.cuts.Load(), tail(gw.logs(), 3000))
	}
	if n := lb.cuts.Load(); n <= 10 {
		t.Fatalf("the proxy cut %d streams, want more than the 10 resumes in a row a stream may take: the test proved nothing", n)
	}
	if n := up.Calls("slow_compute"); n != 1 {
		t.Errorf("the upstream ran slow_compute %d times, want once (resumed, not called again)", n)
	}
	t.Logf("%d cuts, resumed each time", lb.cuts.Load())
}

// A 2025-11-25 stream cut before any event id (an upstream without an
// event store) cannot be resumed: the task fails with why, and the
// upstream, which runs the call on (a lost stream is no cancellation on
// 2025-11-25), is sent notifications/cancelled, so that the tool stops
// rather than run to its end for nobody.
func TestV2025BrokenStreamGivenUpCancelsCall(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{})
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	lb := startCuttingProxy(t, strings.TrimPrefix(srv.URL, "http://"), []byte("notifications/progress"), 0)
	gw := startGateway(t, gatewayOptions{Upstream: lb.addr, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")

	id := createProgressTask(t, c, 60, "cut")
	m := c.call("tasks/result", map[string]string{"taskId": id})
	if m.Error == nil || !strings.Contains(m.Error.Message, "event stream broke before the response to the call (it gave no event id") {
		t.Fatalf("tasks/result = %s / %+v, want the broken stream's failure", m.Result, m.Error)
	}
	if !lb.cut.Load() {
		t.Fatal("the proxy cut no stream: the test proved nothing")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
		t.Fatalf("the upstream's slow_compute was not cancelled (it runs on for nobody): %v\ncaddy:\n%s", err, tail(gw.logs(), 3000))
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
	lb := startCuttingProxy(t, strings.TrimPrefix(srv.URL, "http://"), []byte("notifications/progress"), 0)
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
// upstream sees its client go away. With down, it cuts as a load balancer
// that restarts: its listener and every connection closed at once, and
// nothing listening for down.
type cuttingProxy struct {
	addr   string
	target string
	marker []byte
	down   time.Duration
	cut    atomic.Bool
	// every makes it cut every event stream so, not only the first;
	// cuts counts them.
	every bool
	cuts  atomic.Int32

	t     *testing.T
	mu    sync.Mutex
	ln    net.Listener // nil while down
	open  map[net.Conn]struct{}
	ended bool // the test's cleanup closed it
	conns sync.WaitGroup
}

func startCuttingProxy(t *testing.T, target string, marker []byte, down time.Duration) *cuttingProxy {
	t.Helper()
	return newCuttingProxy(t, &cuttingProxy{target: target, marker: marker, down: down})
}

// startProxyCuttingEvery starts a cuttingProxy that cuts every event
// stream right after its first event carrying marker.
func startProxyCuttingEvery(t *testing.T, target string, marker []byte) *cuttingProxy {
	t.Helper()
	return newCuttingProxy(t, &cuttingProxy{target: target, marker: marker, every: true})
}

func newCuttingProxy(t *testing.T, p *cuttingProxy) *cuttingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr, p.t, p.open = ln.Addr().String(), t, map[net.Conn]struct{}{}
	t.Cleanup(func() {
		p.mu.Lock()
		p.ended = true
		if p.ln != nil {
			_ = p.ln.Close()
		}
		p.mu.Unlock()
		p.conns.Wait()
	})
	p.listen(ln)
	return p
}

// listen accepts connections on ln until it is closed.
func (p *cuttingProxy) listen(ln net.Listener) {
	p.ln = ln
	p.conns.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.open[client] = struct{}{}
			p.mu.Unlock()
			p.conns.Go(func() { p.serve(p.t, client) })
		}
	})
}

// restart closes the listener and every connection, and listens on the
// same address again after p.down.
func (p *cuttingProxy) restart() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.ln.Close()
	p.ln = nil
	for c := range p.open {
		_ = c.Close()
	}
	time.AfterFunc(p.down, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ended {
			return
		}
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			p.t.Errorf("proxy listening again on %s: %v", p.addr, err)
			return
		}
		p.listen(ln)
	})
}

// serve pipes one connection to the target, cutting it as described.
func (p *cuttingProxy) serve(t *testing.T, client net.Conn) {
	t.Helper()
	defer func() {
		p.mu.Lock()
		delete(p.open, client)
		p.mu.Unlock()
	}()
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
		if p.every || !p.cut.Load() {
			seen = append(seen, chunk...)
			if end := cutPoint(seen, p.marker); end >= 0 && (p.every || p.cut.CompareAndSwap(false, true)) {
				p.cut.Store(true)
				p.cuts.Add(1)
				// Forward up to the end of the marked event, then close
				// both sides: the chunk that held it is never finished.
				_, _ = client.Write(chunk[:len(chunk)-(len(seen)-end)])
				if p.down > 0 {
					p.restart()
				}
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

// createProgressTask has c run slow_compute for seconds as a 2025-11-25
// task that reports progress, and returns the task's id.
func createProgressTask(t *testing.T, c *rpcClient, seconds int, label string) string {
	t.Helper()
	m := c.call("tools/call", map[string]any{
		"name": "slow_compute", "arguments": map[string]any{"seconds": seconds, "label": label},
		"task": map[string]any{"ttl": 120000}, "_meta": map[string]any{"progressToken": "tok-1"},
	})
	var created struct {
		Task v2025Task `json:"task"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("create: %s / %+v", m.Result, m.Error)
	}
	return created.Task.TaskID
}
