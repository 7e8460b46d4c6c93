package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// The listen row: one principal's subscriptions/listen streams watch large
// finished tasks while one watched task reports progress, and nobody sends
// a request. The status message progress writes (at most once a second)
// wakes every stream; what each wake-up costs is what Caddy's CPU shows.
const (
	listenStreams  = 16 // every stream slot of the principal
	listenBigTasks = 20
	listenBigBytes = 3_500_000
	listenWindow   = 10 * time.Second
)

// benchListen measures Caddy's CPU time over listenWindow with
// listenStreams streams each watching listenBigTasks finished tasks of
// listenBigBytes and one task reporting progress, and the tasks/get of
// another principal meanwhile.
func benchListen(cfg config) ([]row, error) {
	_, p, url, stop, err := gatewayUnderTest(cfg, "listen-store",
		"max_active_per_principal -1\nrate_limit -1\ntool big required\ntool progress required\n"+fanoutAuth)
	if err != nil {
		return nil, err
	}
	defer stop()
	listener, err := benchToken("listener")
	if err != nil {
		return nil, err
	}
	poller, err := benchToken("poller")
	if err != nil {
		return nil, err
	}
	c := newClient(4)
	call := func(token string, i int, method string, params map[string]any, name string) (map[string]json.RawMessage, error) {
		body, headers := v2026Request(i, method, params, name)
		headers["Authorization"] = "Bearer " + token
		data, err := post(c, url, body, headers)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		var m struct{ Result map[string]json.RawMessage }
		if bytes.HasPrefix(data, []byte("data:")) || bytes.HasPrefix(data, []byte("event:")) || bytes.HasPrefix(data, []byte("id:")) {
			// An event stream: the progress relayed before the call
			// became a task, then the answer.
			events := sse.NewReader(bytes.NewReader(data))
			for ev, err := events.Next(); err == nil && m.Result == nil; ev, err = events.Next() {
				_ = json.Unmarshal([]byte(ev.Data), &m)
			}
		} else {
			_ = json.Unmarshal(data, &m)
		}
		if m.Result == nil {
			return nil, fmt.Errorf("%s answered %.200s", method, data)
		}
		return m.Result, nil
	}
	create := func(token string, i int, tool string, args map[string]any) (string, error) {
		res, err := call(token, i, "tools/call", map[string]any{"name": tool, "arguments": args}, tool)
		if err != nil {
			return "", err
		}
		var id string
		if json.Unmarshal(res["taskId"], &id) != nil || id == "" {
			return "", fmt.Errorf("%s made no task", tool)
		}
		return id, nil
	}
	finished := func(token, id string) error {
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			res, err := call(token, 1, "tasks/get", map[string]any{"taskId": id}, id)
			if err != nil {
				return err
			}
			if string(res["status"]) == `"completed"` {
				return nil
			}
		}
		return fmt.Errorf("task %s did not complete", id)
	}

	var ids []string
	for i := range listenBigTasks {
		id, err := create(listener, i, "big", map[string]any{"bytes": listenBigBytes})
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	for _, id := range ids {
		if err := finished(listener, id); err != nil {
			return nil, err
		}
	}
	polled, err := create(poller, 100, "big", map[string]any{"bytes": 100})
	if err != nil {
		return nil, err
	}
	if err := finished(poller, polled); err != nil {
		return nil, err
	}
	progress, err := create(listener, 101, "progress", map[string]any{})
	if err != nil {
		return nil, err
	}
	ids = append(ids, progress)

	// The streams, each read to its end; ready once it has had the first
	// notification of every task.
	streams := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	var notified atomic.Int64 // notifications/tasks after the first of each task
	ready := make(chan error, listenStreams)
	var bodies []io.Closer
	defer func() {
		for _, b := range bodies {
			_ = b.Close()
		}
	}()
	for i := range listenStreams {
		body, headers := v2026Request(1000+i, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": ids}}, "")
		headers["Authorization"] = "Bearer " + listener
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := streams.Do(req)
		if err != nil {
			return nil, fmt.Errorf("opening listen %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			return nil, fmt.Errorf("opening listen %d: HTTP %d: %s", i, resp.StatusCode, data)
		}
		bodies = append(bodies, resp.Body)
		go readListen(resp.Body, len(ids), ready, &notified)
	}
	timeout := time.After(3 * time.Minute)
	for range listenStreams {
		select {
		case err := <-ready:
			if err != nil {
				return nil, err
			}
		case <-timeout:
			return nil, fmt.Errorf("the listen streams did not get the first notifications of their tasks within 3 minutes")
		}
	}

	// The window: no request but another principal's tasks/get, four a
	// second.
	before := notified.Load()
	m, err := meterCPU(p.cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	var gets []time.Duration
	for end := time.Now().Add(listenWindow); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		t0 := time.Now()
		if _, err := call(poller, 2, "tasks/get", map[string]any{"taskId": polled}, polled); err != nil {
			return nil, err
		}
		gets = append(gets, time.Since(t0))
	}
	used, err := m.used()
	if err != nil {
		return nil, err
	}
	changes := notified.Load() - before
	if changes == 0 {
		return nil, fmt.Errorf("no notification of the progress task's status message in %s", listenWindow)
	}
	_, _ = call(listener, 3, "tasks/cancel", map[string]any{"taskId": progress}, progress)
	cpu := used[0]
	per10 := cpu.Seconds() * float64(10*time.Second) / float64(listenWindow)
	get := result{lat: gets}
	return []row{{
		measure: fmt.Sprintf("listen: %d streams on %d finished tasks of %.1f MB and 1 reporting progress, no requests: Caddy CPU per 10 s; another principal's tasks/get p50 meanwhile",
			listenStreams, listenBigTasks, float64(listenBigBytes)/1e6),
		result: fmt.Sprintf("%.2f CPU-s (%d status notifications); tasks/get p50 %s", per10, changes, ms(get.pct(0.5))),
		target: "≤ 0.5 CPU-s", met: per10 <= 0.5,
	}}, nil
}

// readListen reads a listen stream to its end, reporting ready once it has
// had want notifications/tasks (the first of each task), and counting the
// ones after.
func readListen(body io.Reader, want int, ready chan<- error, notified *atomic.Int64) {
	events := sse.NewReader(body)
	seen := 0
	for {
		ev, err := events.Next()
		if err != nil {
			if seen < want {
				ready <- fmt.Errorf("a listen stream ended after %d of its %d first notifications: %w", seen, want, err)
			}
			return
		}
		if !ev.HasData || !bytes.Contains([]byte(ev.Data[:min(len(ev.Data), 200)]), []byte(`"notifications/tasks"`)) {
			continue
		}
		if seen++; seen == want {
			ready <- nil
		} else if seen > want {
			notified.Add(1)
		}
	}
}
