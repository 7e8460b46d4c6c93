package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// brokenUpstream answers initialize like an MCP server and tools/call with the
// given failure.
func brokenUpstream(t *testing.T, fail http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"tools/call"`) {
			fail(w, r)
			return
		}
		var m jsonrpc.Message
		_ = json.Unmarshal(body, &m)
		if !m.IsRequest() {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"broken","version":"0"}}`))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Transport failures end the task failed with a reason; nothing hangs.
func TestUpstreamFailures(t *testing.T) {
	t.Parallel()
	deadAddr := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return addr
	}
	tests := []struct {
		name     string
		upstream func() string
		wantMsg  string
	}{
		{"unreachable", deadAddr, "upstream unreachable (ref "},
		{"HTTP 500", func() string {
			return brokenUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "boom", http.StatusInternalServerError)
			})
		}, "HTTP 500"},
		{"stream cut mid-event", func() string {
			return brokenUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":")
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler)
			})
		}, ""},
		{"stream ends without an answer", func() string {
			return brokenUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}\n\n")
			})
		}, "without a response"},
		// The upstream holds the stream open, silent, once its answer is
		// no longer read: the task fails with the reason at once, not at
		// its ttl.
		{"stream stalls after an event that is not JSON-RPC", func() string {
			return brokenUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "event: message\ndata: {\n\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			})
		}, "not JSON-RPC"},
		// An event that never ends is too large once the gateway has
		// counted as much of it as it reads of any answer, not at the
		// task's ttl.
		{"event that never ends", func() string {
			return brokenUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				line := []byte("data: " + strings.Repeat("x", 64<<10) + "\n")
				for r.Context().Err() == nil {
					if _, err := w.Write(line); err != nil {
						return
					}
				}
			})
		}, "result too large ("},
		{"not JSON-RPC", func() string {
			return brokenUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `<html>`)
			})
		}, "not JSON-RPC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tt.upstream()
			gw := startGateway(t, gatewayOptions{Upstream: addr})
			c := newRPCClient(t, gw.URL)
			c.version = "2025-11-25"
			task := c.createTask("anything", map[string]any{}, 60000)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r"`), "tasks/result", map[string]string{"taskId": task.TaskID})
			s := c.open(ctx, body)
			defer s.close()
			var final *jsonrpc.Message
			for final == nil {
				m := s.next()
				if m == nil {
					t.Fatal("tasks/result ended without an answer")
				}
				if m.IsResponse() {
					final = m
				}
			}
			if final.Error == nil || final.Error.Code != -32603 || !strings.Contains(final.Error.Message, tt.wantMsg) {
				t.Errorf("tasks/result = %s / %+v, want -32603 containing %q", final.Result, final.Error, tt.wantMsg)
			}
			got := c.getTask(task.TaskID)
			if got.Status != "failed" || got.StatusMessage == "" {
				t.Errorf("task = %+v, want failed with a reason", got)
			}
			// No internal text (a dial error names the upstream's address).
			_, port, _ := net.SplitHostPort(addr)
			for _, text := range []string{final.Error.Message, got.StatusMessage} {
				if strings.Contains(text, addr) || strings.Contains(text, ":"+port) || strings.Contains(text, "dial") {
					t.Errorf("the client reads internal text: %q", text)
				}
			}
		})
	}
}

// Upstream progress for the call's token reaches the tasks/result stream.
func TestV2025ProgressRelay(t *testing.T) {
	t.Parallel()
	c, _, _ := v2025Setup(t, "")
	m := c.call("tools/call", map[string]any{
		"name": "slow_compute", "arguments": map[string]any{"seconds": 1.5, "label": "p"},
		"task": map[string]any{"ttl": 60000}, "_meta": map[string]any{"progressToken": "tok-1"},
	})
	var created struct {
		Task v2025Task `json:"task"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &created) != nil {
		t.Fatalf("create: %s / %v", m.Result, m.Error)
	}
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r"`), "tasks/result", map[string]string{"taskId": created.Task.TaskID})
	s := c.open(context.Background(), body)
	defer s.close()
	progress := 0
	for {
		m := s.next()
		if m == nil {
			t.Fatal("stream ended without the result")
		}
		if m.Method == "notifications/progress" {
			var p struct {
				Token    string  `json:"progressToken"`
				Progress float64 `json:"progress"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if p.Token != "tok-1" {
				t.Errorf("progress for token %q", p.Token)
			}
			progress++
		}
		if m.IsResponse() {
			break
		}
	}
	if progress == 0 {
		t.Error("no progress notification relayed")
	}
}

// A 2025-11-25 upstream may end a call's stream after an event with an id
// and expect the client to resume it with GET and Last-Event-ID; the
// worker does, and the task completes with what the resumed stream says.
func TestV2025StreamResumption(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var callID json.RawMessage
	var resumedFrom, resumedSession string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			mu.Lock()
			resumedFrom, resumedSession = r.Header.Get("Last-Event-ID"), r.Header.Get("Mcp-Session-Id")
			id := callID
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			out, _ := jsonrpc.ResponseBytes(id, json.RawMessage(`{"content":[{"type":"text","text":"resumed answer"}]}`))
			fmt.Fprintf(w, "id: ev-2\ndata: %s\n\n", out)
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		switch {
		case err != nil || !m.IsRequest():
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "tools/call":
			mu.Lock()
			callID = append(json.RawMessage(nil), m.ID...)
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "id: ev-1\nretry: 20\ndata: \n\n") // priming, then the stream ends
		default:
			out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"resuming","version":"0"}}`))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "session-7")
			_, _ = w.Write(out)
		}
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimPrefix(srv.URL, "http://")})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	task := c.createTask("anything", map[string]any{}, 60000)
	m := c.call("tasks/result", map[string]string{"taskId": task.TaskID})
	if m.Error != nil || !strings.Contains(string(m.Result), "resumed answer") {
		t.Fatalf("tasks/result = %s / %+v", m.Result, m.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if resumedFrom != "ev-1" || resumedSession != "session-7" {
		t.Errorf("resumed with Last-Event-ID %q on session %q, want ev-1 on session-7", resumedFrom, resumedSession)
	}
}
