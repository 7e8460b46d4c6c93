package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"
)

// newClient is an HTTP client that keeps one connection per worker.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute}, Timeout: 30 * time.Second}
}

// result is one closed-loop measurement.
type result struct {
	n       int
	elapsed time.Duration
	lat     []time.Duration
	errs    int
}

func (r result) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r result) pct(p float64) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	slices.Sort(r.lat)
	return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))]
}

// closedLoop runs clients workers, each repeating do until d has passed, and
// collects every latency. The request count is bounded by the duration.
func closedLoop(clients int, d time.Duration, do func(worker, i int) error) result {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	var all result
	var wg sync.WaitGroup
	start := time.Now()
	for w := range clients {
		wg.Go(func() {
			var lat []time.Duration
			errs := 0
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := do(w, i); err != nil {
					errs++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all.lat = append(all.lat, lat...)
			all.errs += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	all.elapsed = time.Since(start)
	all.n = len(all.lat)
	return all
}

// post sends a JSON-RPC body with headers and reads the whole answer.
func post(c *http.Client, url string, body []byte, headers map[string]string) ([]byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return data, fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	return data, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// postCreate posts a task-augmented tools/call (body) and returns the id
// of the task its CreateTaskResult names.
func postCreate(c *http.Client, url string, body []byte, headers map[string]string) (string, error) {
	data, err := post(c, url, body, headers)
	if err != nil {
		return "", err
	}
	var m struct {
		Result struct {
			Task struct{ TaskID string } `json:"task"`
		} `json:"result"`
	}
	if json.Unmarshal(data, &m) != nil || m.Result.Task.TaskID == "" {
		return "", fmt.Errorf("not a CreateTaskResult: %s", data)
	}
	return m.Result.Task.TaskID, nil
}
