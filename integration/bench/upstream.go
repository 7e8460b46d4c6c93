package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// trivialUpstream is the fastest MCP server we can put behind the gateway:
// it answers JSON-RPC from memory, so that what is measured is Caddy and the
// gateway. The tool "fast" answers at once; "fast_stream" too, as an event
// stream of the one answer (as the MCP SDKs' servers answer); "hold" answers only when its
// request is cancelled, recording when that happened; "big" answers with a
// text of arguments.bytes bytes; "progress" sends a progress notification
// every 100 ms on an event stream until its request is cancelled. It answers
// server/discover as a 2026-07-28 server (without the tasks extension), so
// the gateway serves 2026-07-28 callers natively rather than through the
// version bridge, whose upstream sessions (at most 256 per route, one or
// more per principal) would otherwise be what the fan-out of 1000
// principals measures.
type trivialUpstream struct {
	addr string
	srv  *http.Server

	// holding counts the hold calls in progress.
	holding atomic.Int64

	mu        sync.Mutex
	cancelled map[string]time.Time // hold label -> when its request ended
	waiters   map[string]chan struct{}
}

var toolsList = func() []byte {
	var tools []string
	for i := range 10 {
		tools = append(tools, fmt.Sprintf(`{"name":"tool_%d","description":"Benchmark tool %d.","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`, i, i))
	}
	return []byte(`{"tools":[` + strings.Join(tools, ",") + `,{"name":"fast","inputSchema":{"type":"object"}},{"name":"hold","inputSchema":{"type":"object"}},` +
		`{"name":"big","inputSchema":{"type":"object"}},{"name":"progress","inputSchema":{"type":"object"}},{"name":"fast_stream","inputSchema":{"type":"object"}}]}`)
}()

// doneResult is the result of the tools that answer at once.
var doneResult = []byte(`{"resultType":"complete","content":[{"type":"text","text":"done"}]}`)

// discoverResult lists 2026-07-28 among the versions, which is what the
// gateway's probe reads; no tasks extension, so the gateway makes the tasks.
var discoverResult = []byte(`{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"bench-upstream","version":"1"}},"ttlMs":0,"cacheScope":"private"}`)

func startUpstream() (*trivialUpstream, error) { return startUpstreamOver(false) }

// startUpstreamOver starts the upstream, speaking h2c (HTTP/2 without TLS)
// beside HTTP/1.1 when h2c is set.
func startUpstreamOver(h2c bool) (*trivialUpstream, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &trivialUpstream{addr: l.Addr().String(), cancelled: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
	u.srv = &http.Server{Handler: u}
	if h2c {
		u.srv.Protocols = new(http.Protocols)
		u.srv.Protocols.SetHTTP1(true)
		u.srv.Protocols.SetUnencryptedHTTP2(true)
		// The default of 250 streams per connection would open a
		// connection per 250 held calls.
		u.srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 1 << 20}
	}
	go func() { _ = u.srv.Serve(l) }()
	return u, nil
}

type rpc struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name      string `json:"name"`
		Arguments struct {
			Label string `json:"label"`
			Bytes int    `json:"bytes"`
		} `json:"arguments"`
	} `json:"params"`
}

func (u *trivialUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m rpc
	if err := json.Unmarshal(body, &m); err != nil || len(m.ID) == 0 || string(m.ID) == "null" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result []byte
	switch {
	case m.Method == "tools/list":
		result = toolsList
	case m.Method == "server/discover":
		result = discoverResult
	case m.Method == "tools/call" && m.Params.Name == "hold":
		u.holding.Add(1)
		<-r.Context().Done()
		u.holding.Add(-1)
		u.mu.Lock()
		u.cancelled[m.Params.Arguments.Label] = time.Now()
		if ch, ok := u.waiters[m.Params.Arguments.Label]; ok {
			close(ch)
		}
		u.mu.Unlock()
		return
	case m.Method == "tools/call" && m.Params.Name == "big":
		result = fmt.Appendf(nil, `{"resultType":"complete","content":[{"type":"text","text":"%s"}]}`, strings.Repeat("x", m.Params.Arguments.Bytes))
	case m.Method == "tools/call" && m.Params.Name == "progress":
		serveProgress(w, r)
		return
	case m.Method == "tools/call" && m.Params.Name == "fast_stream":
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", m.ID, doneResult)
		return
	case m.Method == "tools/call":
		result = doneResult
	default:
		result = []byte(`{"resultType":"complete"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
}

// serveProgress answers a call with an event stream of progress
// notifications, one every 100 ms, until the call is cancelled.
func serveProgress(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 1; ; i++ {
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":%d,\"message\":\"step %d\"}}\n\n", i, i)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// cancelledAt returns when the hold call labelled label ended, waiting up
// to timeout for it.
func (u *trivialUpstream) cancelledAt(label string, timeout time.Duration) (time.Time, bool) {
	u.mu.Lock()
	if t, ok := u.cancelled[label]; ok {
		u.mu.Unlock()
		return t, true
	}
	ch, ok := u.waiters[label]
	if !ok {
		ch = make(chan struct{})
		u.waiters[label] = ch
	}
	u.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(timeout):
		return time.Time{}, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.cancelled[label]
	return t, ok
}
