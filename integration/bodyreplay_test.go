package integration

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// A body the gateway read and handed on is the bytes the client sent
// every time reverse_proxy sends it: here requests dial an upstream
// address where nothing listens, and lb_try_duration sends them again to
// the next, for a call passed through (the client's body, over
// the bounds in which the gateway reads it at once) and for a task's call
// (the gateway's own body) alike.
func TestBodyReplayedAfterDialFailure(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{})
	var mu sync.Mutex
	var posts [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost {
			mu.Lock()
			posts = append(posts, body)
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	// Issued to this test alone, and nothing listens there. Round robin
	// picks it and the live one by turns, retries included; max_fails
	// keeps it in the turns, while fail_duration has Caddy count its
	// failed dials, which the admin API reports.
	dead := freeAddr(t)
	gw := startGateway(t, gatewayOptions{Upstream: dead + " " + strings.TrimPrefix(srv.URL, "http://") +
		" {\n\tlb_policy round_robin\n\tlb_try_duration 30s\n\tlb_try_interval 10ms\n\tfail_duration 10m\n\tmax_fails 1000\n}"})

	name := strings.Repeat("0123456789abcdef", 8<<10) // 128 KiB: the body is read in more than one piece
	plain := newV2026Client(t, gw.URL, false)
	res := plain.ok("tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": name}})
	if !strings.Contains(string(res["content"]), "Hello, "+name+"!") {
		t.Errorf("greet answered %.200s, want it to greet the name sent", res["content"])
	}

	tasks := newV2026Client(t, gw.URL, true)
	created := tasks.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1, "label": "replayed-" + name[:64]}})
	if got := tasks.waitStatus(str(created["taskId"]), "completed"); !strings.Contains(string(got["result"]), "Computed replayed-"+name[:64]) {
		t.Errorf("the task completed with %.300s", got["result"])
	}

	if fails := upstreamFails(t, gw, dead); fails < 1 {
		t.Errorf("the dead upstream failed %d dials, want at least one: no body was sent again", fails)
	}
	mu.Lock()
	defer mu.Unlock()
	greeted := false
	for _, body := range posts {
		if !json.Valid(body) {
			t.Errorf("the upstream was posted %.200q, not one JSON value", body)
		}
		greeted = greeted || bytes.Contains(body, []byte(`"name":"`+name+`"`))
	}
	if !greeted {
		t.Errorf("no POST the upstream saw carried the name whole")
	}
}

// upstreamFails is the count of failures reverse_proxy holds against the
// upstream at addr, from Caddy's admin API.
func upstreamFails(t *testing.T, gw *gateway, addr string) int {
	t.Helper()
	resp, err := httpClient.Get("http://" + gw.adminAddr + "/reverse_proxy/upstreams")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ups []struct {
		Address string `json:"address"`
		Fails   int    `json:"fails"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ups); err != nil {
		t.Fatalf("reading the upstreams' state: %v", err)
	}
	for _, u := range ups {
		if u.Address == addr {
			return u.Fails
		}
	}
	t.Fatalf("no upstream %s in %+v", addr, ups)
	return 0
}
