package integration

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// adminUpstreams is the upstream part of the admin health answer.
type adminUpstreams struct {
	Healthy bool `json:"healthy"`
	Stores  []struct {
		Upstreams []struct {
			Route       string    `json:"route"`
			Reachable   *bool     `json:"reachable"`
			LastReached time.Time `json:"last_reached"`
			LastError   string    `json:"last_error"`
			LastErrorAt time.Time `json:"last_error_at"`
			Versions    []string  `json:"versions"`
		} `json:"upstreams"`
	} `json:"stores"`
}

// A wrong or dead upstream address shows: the admin health answer and
// `caddy mcp-tasks health` report the route's upstream unreachable with the
// error and its time, the log warns once (not on every call), and the
// store's health still decides the status (200). Once the upstream answers,
// the route reports it reachable, with the versions its probe found.
func TestUpstreamStateInHealth(t *testing.T) {
	t.Parallel()
	upAddr := freeAddr(t) // nothing listens there yet
	gw := startGateway(t, gatewayOptions{Upstream: upAddr})
	health := func() adminUpstreams {
		var h adminUpstreams
		code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
		if err := json.Unmarshal([]byte(body), &h); err != nil {
			t.Fatalf("health %d %s: %v", code, body, err)
		}
		if code != http.StatusOK || !h.Healthy || len(h.Stores) != 1 || len(h.Stores[0].Upstreams) != 1 {
			t.Fatalf("health %d %s, want 200 (the store decides) with one route's upstream", code, body)
		}
		return h
	}
	waitFor(t, 30*time.Second, "the store to open", func() bool {
		code, _ := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
		return code == http.StatusOK
	})
	if u := health().Stores[0].Upstreams[0]; u.Reachable != nil || u.LastError != "" {
		t.Errorf("before any call: %+v, want an unknown state", u)
	}

	c := newV2026Client(t, gw.URL, true)
	toolsList := func() int {
		_, body := c.body("tools/list", nil)
		req := c.newRequest(context.Background(), body)
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/list")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for range 3 {
		if status := toolsList(); status < 500 {
			t.Fatalf("tools/list to a dead upstream: HTTP %d, want a 5xx", status)
		}
	}
	u := health().Stores[0].Upstreams[0]
	if u.Reachable == nil || *u.Reachable || u.LastError == "" || u.LastErrorAt.IsZero() || u.Route == "" {
		t.Errorf("after calls to a dead upstream: %+v, want unreachable with the error and its time", u)
	}
	if strings.Contains(u.LastError, "{id=") || strings.Contains(u.LastError, ".go:") || !strings.Contains(u.LastError, "dial tcp") {
		t.Errorf("last_error %q, want the dial failure without Caddy's request id and Go frame", u.LastError)
	}
	if n := strings.Count(gw.logs(), `"msg":"upstream unreachable`); n != 1 {
		t.Errorf("%d warnings of an unreachable upstream for 3 calls, want 1:\n%s", n, gw.logs())
	}
	out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--address", gw.adminAddr)
	if !ok || !strings.Contains(out, "ROUTE") || !strings.Contains(out, "unreachable") {
		t.Errorf("caddy mcp-tasks health: ok %v\n%s%s, want the route's upstream unreachable", ok, out, errOut)
	}

	// The upstream comes up at the configured address.
	l, err := net.Listen("tcp", upAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: upstream.New(upstream.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	waitFor(t, 30*time.Second, "a call to reach the upstream", func() bool {
		return toolsList() == http.StatusOK
	})
	u = health().Stores[0].Upstreams[0]
	if u.Reachable == nil || !*u.Reachable || u.LastReached.IsZero() || !u.LastReached.After(u.LastErrorAt) {
		t.Errorf("after a call reached the upstream: %+v, want reachable, reached after the last error", u)
	}
	if !slices.Contains(u.Versions, "2026-07-28") || !slices.Contains(u.Versions, "2025-11-25") {
		t.Errorf("versions %q, want both the upstream speaks (from the probe)", u.Versions)
	}
	if !strings.Contains(gw.logs(), "upstream reachable again") {
		t.Errorf("no log of the upstream's recovery:\n%s", gw.logs())
	}
}
