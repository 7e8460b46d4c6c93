package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// fanoutSecret is the HS256 key of the fan-out site's auth jwt; the bench
// mints every subscriber's token with it.
const fanoutSecret = "the-fan-out-bench-hmac-secret-of-32-bytes-or-more"

// fanoutAuth makes the fan-out site verify bearer JWTs, so that each
// subscriber is a principal of its own, as 1000 listeners of a real
// deployment are (the gateway caps open streams per principal).
const fanoutAuth = "auth jwt {\n\thmac_secret " + fanoutSecret + "\n\tissuer https://idp.bench\n\taudience mcp-gateway\n}"

// benchFanOut opens one subscriptions/listen stream per task for
// cfg.subscribers tasks held upstream, then cancels the tasks one at a time
// and measures how long the status change takes to reach its subscriber,
// and how long the cancellation takes to reach the upstream call. Each task
// and its stream belong to a principal of their own.
func benchFanOut(cfg config) ([]row, error) {
	up, _, url, stop, err := gatewayUnderTest(cfg, "fanout-store", "task_after 10ms\nmax_active_per_principal -1\nrate_limit -1\n"+fanoutAuth)
	if err != nil {
		return nil, err
	}
	defer stop()
	n := cfg.subscribers
	// One bearer token per subscriber, minted before any timing starts.
	tokens := make([]string, n)
	for i := range tokens {
		if tokens[i], err = benchToken(fmt.Sprint("listener-", i)); err != nil {
			return nil, err
		}
	}

	// The tasks: calls of the hold tool, which answers only when cancelled.
	c := newClient(32)
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	var createErr error
	var mu sync.Mutex
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			body, headers := v2026Request(i, "tools/call", map[string]any{"name": "hold", "arguments": map[string]any{"label": fmt.Sprint("h", i)}}, "hold")
			headers["Authorization"] = "Bearer " + tokens[i]
			data, err := post(c, url, body, headers)
			var m struct{ Result struct{ TaskID string } }
			if err == nil && (json.Unmarshal(data, &m) != nil || m.Result.TaskID == "") {
				err = fmt.Errorf("no task: %s", data)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				createErr = err
				return
			}
			ids[i] = m.Result.TaskID
		})
	}
	wg.Wait()
	if createErr != nil {
		return nil, createErr
	}

	// One stream per task, each on its own connection.
	streams := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	received := make(chan fanoutEvent, n)
	ready := make(chan error, n)
	var bodies []interface{ Close() error }
	for i, id := range ids {
		body, headers := v2026Request(100000+i, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}}, "")
		headers["Authorization"] = "Bearer " + tokens[i]
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := streams.Do(req)
		if err != nil {
			return nil, fmt.Errorf("opening subscription %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			// Say why (a cap, a refused token) rather than wait for an
			// acknowledgement that will not come.
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			_ = resp.Body.Close()
			return nil, fmt.Errorf("opening subscription %d: HTTP %d: %s", i, resp.StatusCode, data)
		}
		bodies = append(bodies, resp.Body)
		go readSubscription(resp, id, ready, received)
	}
	defer func() {
		for _, b := range bodies {
			_ = b.Close()
		}
	}()
	for range ids {
		if err := <-ready; err != nil {
			return nil, err
		}
	}

	// Cancel one task at a time, a few in parallel, timing both paths.
	var sent sync.Map // task id -> time the cancel was sent
	var upLat []time.Duration
	var upMu sync.Mutex
	cancelSem := make(chan struct{}, 4)
	for i, id := range ids {
		wg.Go(func() {
			cancelSem <- struct{}{}
			defer func() { <-cancelSem }()
			body, headers := v2026Request(200000+i, "tasks/cancel", map[string]any{"taskId": id}, id)
			headers["Authorization"] = "Bearer " + tokens[i]
			t0 := time.Now()
			sent.Store(id, t0)
			if _, err := post(c, url, body, headers); err != nil {
				return
			}
			if at, ok := up.cancelledAt(fmt.Sprint("h", i), 10*time.Second); ok {
				upMu.Lock()
				upLat = append(upLat, at.Sub(t0))
				upMu.Unlock()
			}
		})
	}
	wg.Wait()
	var notifyLat []time.Duration
	timeout := time.After(30 * time.Second)
	for len(notifyLat) < n {
		select {
		case ev := <-received:
			if t0, ok := sent.Load(ev.id); ok {
				notifyLat = append(notifyLat, ev.at.Sub(t0.(time.Time)))
			}
		case <-timeout:
			return nil, fmt.Errorf("only %d of %d subscribers heard of their cancellation", len(notifyLat), n)
		}
	}
	if len(upLat) != n {
		return nil, fmt.Errorf("the upstream saw %d of %d cancellations", len(upLat), n)
	}
	notify, upstream := result{lat: notifyLat}, result{lat: upLat}
	return []row{
		{measure: fmt.Sprintf("fan-out: %d subscribers, status change to receipt, p50 / p99", n),
			result: fmt.Sprintf("%s / %s", ms(notify.pct(0.5)), ms(notify.pct(0.99))), target: "p99 ≤ 20 ms", met: notify.pct(0.99) <= 20*time.Millisecond},
		{measure: "fan-out: tasks/cancel reaching the upstream call, p50 / p99",
			result: fmt.Sprintf("%s / %s", ms(upstream.pct(0.5)), ms(upstream.pct(0.99))), target: "p99 ≤ 20 ms", met: upstream.pct(0.99) <= 20*time.Millisecond},
	}, nil
}

// benchToken mints an HS256 token for subject that the fan-out site's
// auth jwt accepts, valid for an hour (longer than any bench run).
func benchToken(subject string) (string, error) {
	claims := jwt.MapClaims{"sub": subject, "iss": "https://idp.bench", "aud": "mcp-gateway", "exp": time.Now().Add(time.Hour).Unix()}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(fanoutSecret))
	if err != nil {
		return "", fmt.Errorf("minting the token of %s: %w", subject, err)
	}
	return s, nil
}

type fanoutEvent struct {
	id string
	at time.Time
}

// readSubscription reports ready after the acknowledgement, then the time
// the task's cancelled state arrives.
func readSubscription(resp *http.Response, id string, ready chan<- error, received chan<- fanoutEvent) {
	events := sse.NewReader(resp.Body)
	acked := false
	for {
		ev, err := events.Next()
		if err != nil {
			if !acked {
				ready <- fmt.Errorf("subscription to %s ended before its acknowledgement: %w", id, err)
			}
			return
		}
		if !ev.HasData || ev.Data == "" {
			continue
		}
		var m struct {
			Method string
			Params struct{ Status string }
		}
		_ = json.Unmarshal([]byte(ev.Data), &m)
		switch {
		case m.Method == "notifications/subscriptions/acknowledged":
			acked = true
			ready <- nil
		case m.Method == "notifications/tasks" && m.Params.Status == "cancelled":
			received <- fanoutEvent{id: id, at: time.Now()}
			return
		}
	}
}

// v2026Request builds a 2026-07-28 request that declares the tasks
// extension, with its routing headers.
func v2026Request(id int, method string, params map[string]any, name string) ([]byte, map[string]string) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
	}
	body, _ := jsonrpc.RequestBytes(json.RawMessage(fmt.Sprint(id)), method, params)
	headers := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		headers["Mcp-Name"] = name
	}
	return body, headers
}
