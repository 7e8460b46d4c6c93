package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// streamsPerPrincipal is the gateway's default cap of long-lived answers
// per principal: the streams curve fills each principal's slots.
const streamsPerPrincipal = 16

// benchStreams measures subscriptions/listen streams open at once on one
// process, for each size of cfg.streams: Caddy's resident memory per open
// stream, and how long a task's status change takes to reach every stream
// watching it. The streams belong to principals of 16 streams each (the
// default cap), and each principal's streams watch its one task, a call
// of the hold tool; cancelling the tasks, four at a time, is the change.
// The curve is measured with clients over HTTP/1.1, a connection per
// stream (what MCP clients' default HTTP stacks do), and over HTTP/2
// (h2c here; HTTPS clients that negotiate HTTP/2 get the same), many
// streams on a connection.
func benchStreams(cfg config) ([]row, error) {
	sizes, err := parseSizes(cfg.streams)
	if err != nil {
		return nil, fmt.Errorf("-streams: %w", err)
	}
	var rows []row
	for _, cp := range []clientProtocol{clientHTTP1, clientH2C} {
		for _, n := range sizes {
			r, err := streamsPoint(cfg, n, cp)
			if err != nil {
				return nil, fmt.Errorf("streams over %s: %w", cp.name, err)
			}
			rows = append(rows, r...)
		}
	}
	return rows, nil
}

// clientProtocol is how the streams' clients reach Caddy.
type clientProtocol struct {
	name string
	// globals are the Caddy global options it needs.
	globals string
	// transport is the clients' HTTP transport.
	transport func() *http.Transport
}

var (
	clientHTTP1 = clientProtocol{name: "HTTP/1.1", transport: func() *http.Transport {
		return &http.Transport{MaxIdleConnsPerHost: -1}
	}}
	clientH2C = clientProtocol{name: "HTTP/2 (h2c)", globals: "\tservers {\n\t\tprotocols h1 h2 h2c\n\t}\n",
		transport: func() *http.Transport {
			t := &http.Transport{Protocols: new(http.Protocols)}
			t.Protocols.SetUnencryptedHTTP2(true)
			return t
		}}
)

func streamsPoint(cfg config, n int, cp clientProtocol) ([]row, error) {
	_, p, url, stop, err := gatewayUnderTestGlobals(cfg, fmt.Sprintf("streams-store-%s-%d", strings.NewReplacer("/", "", " ", "", "(", "", ")", "").Replace(cp.name), n),
		"task_after 10ms\nmax_active_per_principal -1\nrate_limit -1\n"+fanoutAuth, cp.globals)
	if err != nil {
		return nil, err
	}
	defer stop()
	principals := (n + streamsPerPrincipal - 1) / streamsPerPrincipal
	tokens := make([]string, principals)
	for i := range tokens {
		if tokens[i], err = benchToken(fmt.Sprintf("streams-%d-%d", n, i)); err != nil {
			return nil, err
		}
	}
	c := newClient(32)
	ids := make([]string, principals)
	if err := closedCount(32, principals, func(i int) error {
		body, headers := v2026Request(i, "tools/call", map[string]any{"name": "hold", "arguments": map[string]any{"label": fmt.Sprintf("s%d-%d", n, i)}}, "hold")
		headers["Authorization"] = "Bearer " + tokens[i]
		data, err := post(c, url, body, headers)
		var m struct{ Result struct{ TaskID string } }
		if err == nil && (json.Unmarshal(data, &m) != nil || m.Result.TaskID == "") {
			err = fmt.Errorf("no task: %s", data)
		}
		ids[i] = m.Result.TaskID
		return err
	}); err != nil {
		return nil, fmt.Errorf("creating the watched tasks: %w", err)
	}
	before, err := p.memoryNow("", "")
	if err != nil {
		return nil, err
	}
	gorBefore := goroutines(p)

	transport := cp.transport()
	defer transport.CloseIdleConnections()
	streams := &http.Client{Transport: transport}
	received := make(chan fanoutEvent, n)
	ready := make(chan error, n)
	var (
		mu     sync.Mutex
		bodies []io.Closer
	)
	defer func() {
		for _, b := range bodies {
			_ = b.Close()
		}
	}()
	if err := closedCount(16, n, func(j int) error {
		i := j / streamsPerPrincipal
		body, headers := v2026Request(100000+j, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{ids[i]}}}, "")
		headers["Authorization"] = "Bearer " + tokens[i]
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := streams.Do(req)
		if err != nil {
			return fmt.Errorf("opening stream %d: %w", j, err)
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			return fmt.Errorf("opening stream %d: HTTP %d: %s", j, resp.StatusCode, data)
		}
		mu.Lock()
		bodies = append(bodies, resp.Body)
		mu.Unlock()
		go readSubscription(resp, ids[i], ready, received)
		return nil
	}); err != nil {
		return nil, err
	}
	for range n {
		if err := <-ready; err != nil {
			return nil, err
		}
	}
	after, err := p.memoryNow(cfg.profiles, fmt.Sprintf("streams-%d-heap", n))
	if err != nil {
		return nil, err
	}
	gorPer := float64(goroutines(p)-gorBefore) / float64(n)
	perStream := float64((after.anon+after.file)-(before.anon+before.file)) / float64(n)
	heapPer := float64(after.heap-before.heap) / float64(n)

	var sent sync.Map // task id -> when its cancel was sent
	if err := closedCount(4, principals, func(i int) error {
		body, headers := v2026Request(200000+i, "tasks/cancel", map[string]any{"taskId": ids[i]}, ids[i])
		headers["Authorization"] = "Bearer " + tokens[i]
		sent.Store(ids[i], time.Now())
		_, err := post(c, url, body, headers)
		return err
	}); err != nil {
		return nil, fmt.Errorf("cancelling the watched tasks: %w", err)
	}
	var lat []time.Duration
	timeout := time.After(time.Minute)
	for len(lat) < n {
		select {
		case ev := <-received:
			if t0, ok := sent.Load(ev.id); ok {
				lat = append(lat, ev.at.Sub(t0.(time.Time)))
			}
		case <-timeout:
			return nil, fmt.Errorf("only %d of %d streams heard of their task's cancellation", len(lat), n)
		}
	}
	notify := result{lat: lat}
	return []row{
		{measure: fmt.Sprintf("streams curve, clients over %s: %d subscriptions/listen streams open on one process (%d principals × %d), Caddy's resident memory per stream (its Go heap per stream; goroutines per stream)", cp.name, n, principals, streamsPerPrincipal),
			result: fmt.Sprintf("%.1f KiB (heap %.1f KiB; %.2f goroutines)", perStream/1024, heapPer/1024, gorPer),
			target: "≤ 16 KiB", met: perStream <= 16<<10},
		{measure: fmt.Sprintf("streams curve, clients over %s: %d streams, a watched task's cancellation to its receipt on every stream watching it, p50 / p99", cp.name, n),
			result: fmt.Sprintf("%s / %s", ms(notify.pct(0.5)), ms(notify.pct(0.99))),
			target: "p99 ≤ 20 ms", met: notify.pct(0.99) <= 20*time.Millisecond},
	}, nil
}
