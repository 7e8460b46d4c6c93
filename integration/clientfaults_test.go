package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Clients that misbehave, against the real ./caddy: requests whose headers
// or bodies trickle in (slowloris), thousands of idle keep-alive
// connections, and subscribers that stop reading their event streams.
// Caddy's own server timeouts bound the slow requests; the gateway must
// keep serving everyone else meanwhile, and hold nothing without bound.
// Each test prints what it held and what Caddy's goroutines and heap did.

// clientFaultTimeouts shorten Caddy's header and body timeouts (defaults:
// read_header 1m, read_body none) so that the tests see them apply.
const clientFaultTimeouts = `
servers {
	timeouts {
		read_header 2s
		read_body 3s
	}
}
`

// caddyFigures are what Caddy's /metrics says of its goroutines and heap.
type caddyFigures struct {
	goroutines int
	heapMiB    float64
}

func (f caddyFigures) String() string {
	return fmt.Sprintf("%d goroutines, heap %.0f MiB", f.goroutines, f.heapMiB)
}

// figures reads Caddy's goroutine count and heap in use.
func figures(t *testing.T, gw *gateway) caddyFigures {
	t.Helper()
	m := gw.metrics()
	return caddyFigures{goroutines: int(metricValue(t, m, "go_goroutines")), heapMiB: metricValue(t, m, "go_memstats_heap_inuse_bytes") / (1 << 20)}
}

// metricValue is the value of an unlabelled metric in Prometheus text.
func metricValue(t *testing.T, metrics, name string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", name, err)
			}
			return f
		}
	}
	t.Fatalf("Caddy's metrics lack %s", name)
	return 0
}

// rawLocalPorts hands out the local ports of dialRaw's connections: above
// freeAddr's and below the kernel's ephemeral range (32768 and up here),
// so that thousands of connections take no port another test is about to
// listen on, nor one the kernel gives another process's connection.
var rawLocalPorts atomic.Int32

const (
	rawPortFirst = 20000
	rawPortCount = 12000
)

// dialRaw opens a TCP connection to addr, closed when the test ends. A
// positive rcvbuf shrinks its receive buffer before it connects, so that
// the window the server sees stays small: a client that does not read
// then stops the server's writes after a few kilobytes.
func dialRaw(t *testing.T, addr string, rcvbuf int) net.Conn {
	t.Helper()
	var last error
	for range 100 { // a port another process holds is skipped
		port := rawPortFirst + int(rawLocalPorts.Add(1))%rawPortCount
		d := net.Dialer{Timeout: promptBound, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				// A port of an earlier connection may be in TIME_WAIT.
				serr = setSocketOption(fd, syscall.SO_REUSEADDR, 1)
				if serr == nil && rcvbuf > 0 {
					serr = setSocketOption(fd, syscall.SO_RCVBUF, rcvbuf)
				}
			})
			if err != nil {
				return err
			}
			return serr
		}
		conn, err := d.Dial("tcp", addr)
		if err == nil {
			t.Cleanup(func() { _ = conn.Close() })
			return conn
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
			t.Fatalf("dialing %s: %v", addr, err)
		}
		last = err
	}
	t.Fatalf("dialing %s: no free local port: %v", addr, last)
	return nil
}

// rawPost is an HTTP/1.1 POST of body to /mcp, with headers over the
// defaults (JSON in, JSON or an event stream out).
func rawPost(headers map[string]string, body string) string {
	h := map[string]string{"Host": "127.0.0.1", "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Content-Length": strconv.Itoa(len(body))}
	maps.Copy(h, headers)
	var b strings.Builder
	b.WriteString("POST /mcp HTTP/1.1\r\n")
	for k, v := range h {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.String()
}

// closedByServer reads conn until the server closes it (true) or within
// passes (false), discarding whatever the server answered first.
func closedByServer(conn net.Conn, within time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// trickle writes one byte to each connection every interval until stop,
// as a slowloris client does; a connection the server closed is left.
func trickle(conns []net.Conn, b byte, interval time.Duration, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		live := append([]net.Conn(nil), conns...)
		for len(live) > 0 {
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			kept := live[:0]
			for _, c := range live {
				_ = c.SetWriteDeadline(time.Now().Add(time.Second))
				if _, err := c.Write([]byte{b}); err == nil {
					kept = append(kept, c)
				}
			}
			live = kept
		}
	})
	return &wg
}

// servedMeanwhile runs n short calls of each protocol version to their end
// (with token, "" for none) and returns how many pairs completed.
func servedMeanwhile(t *testing.T, url, token string, n int) int {
	t.Helper()
	served := 0
	for range n {
		if callCompletes(t, url, token, true) && callCompletes(t, url, token, false) {
			served++
		}
	}
	return served
}

// closeAll reads each connection until the server closes it, in parallel,
// and returns how many it closed within 30 seconds.
func closeAll(conns []net.Conn) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	closed := 0
	for _, c := range conns {
		wg.Go(func() {
			if closedByServer(c, 30*time.Second) {
				mu.Lock()
				closed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return closed
}

// TestClientSlowHeaders: connections whose request headers trickle in a
// byte at a time are closed by Caddy's read_header timeout, and the
// gateway serves everyone else meanwhile.
func TestClientSlowHeaders(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "task_after 300ms\nrate_limit off", GlobalOptions: clientFaultTimeouts})
	const n = 200
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialRaw(t, gw.addr, 0)
		if _, err := io.WriteString(conns[i], "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	stop := make(chan struct{})
	wg := trickle(conns, 'a', 200*time.Millisecond, stop)
	served := servedMeanwhile(t, gw.URL, "", 3)
	closed := closeAll(conns)
	took := time.Since(began)
	close(stop)
	wg.Wait()
	t.Logf("slow headers: %d connections trickling their headers; %d of 3 calls of each version served meanwhile; Caddy closed %d of them within %s (read_header 2s)",
		n, served, closed, took.Round(100*time.Millisecond))
	if served != 3 {
		t.Errorf("%d of 3 calls of each version completed while headers trickled in, want all", served)
	}
	if closed != n {
		t.Errorf("Caddy closed %d of %d connections whose headers trickled in, want all", closed, n)
	}
}

// TestClientSlowBodies: requests that declare a body of max_body bytes and
// send it a byte at a time are ended by Caddy's read_body timeout, and the
// gateway serves everyone else meanwhile. The heap figures show what the
// gateway holds for a body while it trickles in.
func TestClientSlowBodies(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "task_after 300ms\nrate_limit off", GlobalOptions: clientFaultTimeouts})
	idle := figures(t, gw)
	const n = 50
	const declared = 4 << 20 // max_body's default
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dialRaw(t, gw.addr, 0)
		head := rawPost(v2026Headers("tools/call", "greet"), "")
		head = strings.Replace(head, "Content-Length: 0", "Content-Length: "+strconv.Itoa(declared), 1)
		if _, err := io.WriteString(conns[i], head+`{"jsonrpc":"2.0",`); err != nil {
			t.Fatal(err)
		}
	}
	began := time.Now()
	stop := make(chan struct{})
	wg := trickle(conns, ' ', 200*time.Millisecond, stop)
	time.Sleep(500 * time.Millisecond) // every body begun
	held := figures(t, gw)
	served := servedMeanwhile(t, gw.URL, "", 3)
	closed := closeAll(conns)
	took := time.Since(began)
	close(stop)
	wg.Wait()
	after := figures(t, gw)
	t.Logf("slow bodies: %d requests declaring %d MiB bodies, trickling them; %d of 3 calls of each version served meanwhile; Caddy ended %d of them within %s (read_body 3s)",
		n, declared>>20, served, closed, took.Round(100*time.Millisecond))
	t.Logf("slow bodies: Caddy idle %s; while the bodies trickled %s; after %s", idle, held, after)
	if served != 3 {
		t.Errorf("%d of 3 calls of each version completed while bodies trickled in, want all", served)
	}
	if closed != n {
		t.Errorf("Caddy ended %d of %d requests whose bodies trickled in, want all", closed, n)
	}
}

// TestClientIdleConnections: 2000 keep-alive connections, each after one
// answered request, stay open and idle (Caddy's idle_timeout, 5m by
// default, is theirs); the gateway keeps serving others, and Caddy's
// goroutines come back down once they close.
func TestClientIdleConnections(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "task_after 300ms\nrate_limit off"})
	idle := figures(t, gw)
	const n = 2000
	conns := make([]net.Conn, n)
	var answered sync.WaitGroup
	var mu sync.Mutex
	failures := map[string]int{}
	sem := make(chan struct{}, 16)
	for i := range conns {
		conns[i] = dialRaw(t, gw.addr, 0)
		sem <- struct{}{}
		answered.Go(func() {
			defer func() { <-sem }()
			if err := oneRequest(conns[i]); err != nil {
				mu.Lock()
				failures[err.Error()]++
				mu.Unlock()
			}
		})
	}
	answered.Wait()
	open := figures(t, gw)
	served := servedMeanwhile(t, gw.URL, "", 3)
	for _, c := range conns {
		_ = c.Close()
	}
	var after caddyFigures
	waitFor(t, 60*time.Second, "Caddy's goroutines to come back down once the idle connections closed", func() bool {
		after = figures(t, gw)
		return after.goroutines <= idle.goroutines+50
	})
	t.Logf("idle connections: %d keep-alive connections open and idle after one request each (%d answered; failures %v); %d of 3 calls of each version served meanwhile",
		n, n-sumCounts(failures), failures, served)
	t.Logf("idle connections: Caddy idle %s; with them open %s; after they closed %s", idle, open, after)
	if len(failures) != 0 {
		t.Errorf("requests on the idle connections failed: %v", failures)
	}
	if served != 3 {
		t.Errorf("%d of 3 calls of each version completed beside %d idle connections, want all", served, n)
	}
}

// oneRequest sends a 2026-07-28 tasks/get (of a task that does not exist:
// the gateway answers it alone) on conn, keep-alive, and reads the answer.
func oneRequest(conn net.Conn) error {
	_ = conn.SetDeadline(time.Now().Add(promptBound))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if _, err := io.WriteString(conn, rawPost(v2026Headers("tasks/get", "nope"), v2026Body(1, "tasks/get", map[string]any{"taskId": "nope"}))); err != nil {
		return fmt.Errorf("writing: %w", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		return errors.New("the server closed the connection after its answer")
	}
	return nil
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// listenRefused opens a subscriptions/listen stream as token (for a task
// that does not exist: the stream is held all the same), closes it, and
// reports whether it was refused with 429.
func listenRefused(t *testing.T, url, token string) bool {
	t.Helper()
	resp, cancel, err := openListen(url, token)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusTooManyRequests
}

// openListen opens a subscriptions/listen stream as token for a task that
// does not exist, and returns its answer; cancel ends it.
func openListen(url, token string) (*http.Response, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), promptBound)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(v2026Body(1, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{"none"}}})))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Authorization": "Bearer " + token} {
		req.Header.Set(k, v)
	}
	for k, v := range v2026Headers("subscriptions/listen", "") {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("subscriptions/listen: %w", err)
	}
	return resp, cancel, nil
}
