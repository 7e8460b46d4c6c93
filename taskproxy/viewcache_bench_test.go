package taskproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// BenchmarkTasksGetFinished is a 2025-11-25 tasks/get of a finished task
// through the gateway, the polling hot path, over 1000 tasks of a store on
// disk.
func BenchmarkTasksGetFinished(b *testing.B) {
	s := benchStore(b, b.TempDir(), false)
	rt := NewRuntime(s)
	b.Cleanup(func() { _ = rt.Close(0) })
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	if err != nil {
		b.Fatal(err)
	}
	bodies := make([]string, 1000)
	for i := range bodies {
		t := benchTask()
		t.Status, t.Result = task.StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
		if err := s.Create(context.Background(), t); err != nil {
			b.Fatal(err)
		}
		bodies[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, t.ID)
	}
	next := http.NotFoundHandler()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(bodies[i%len(bodies)]))
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if err := g.ServeHTTP(w, r, next); err != nil || !strings.Contains(w.Body.String(), `"completed"`) {
			b.Fatal(err, w.Body.String())
		}
		i++
	}
}

// BenchmarkTaskEnd is the store's part of a task's life after its call:
// storing the outcome, then the client's first tasks/get.
func BenchmarkTaskEnd(b *testing.B) {
	s := benchStore(b, b.TempDir(), false)
	rt := NewRuntime(s)
	b.Cleanup(func() { _ = rt.Close(0) })
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	if err != nil {
		b.Fatal(err)
	}
	result := json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	next := http.NotFoundHandler()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		t := benchTask()
		t.Lease = task.Lease{Holder: s.Holder(), Expires: time.Now().Add(time.Hour)} // recovery leaves it alone
		if err := s.Create(context.Background(), t); err != nil {
			b.Fatal(err)
		}
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, t.ID)
		b.StartTimer()
		g.env.Route.Finish(t, result, nil)
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if err := g.ServeHTTP(w, r, next); err != nil || !strings.Contains(w.Body.String(), `"completed"`) {
			b.Fatal(err, w.Body.String())
		}
	}
}

// BenchmarkResponseBytes encodes a CreateTaskResult answer, as every
// create and cancel does.
func BenchmarkResponseBytes(b *testing.B) {
	result := v2025.CreateResult(benchTask())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonrpc.ResponseBytes(json.RawMessage("42"), result); err != nil {
			b.Fatal(err)
		}
	}
}
