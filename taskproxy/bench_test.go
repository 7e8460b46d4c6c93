package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Micro-benchmarks of the hot paths. They report allocations; the figures
// and the end-to-end table are in the README's Performance section.

var benchCall = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":1,"label":"x"},"_meta":{"progressToken":"p"},"task":{"ttl":60000}}}`)

func BenchmarkParseMessage(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jsonrpc.Parse(benchCall); err != nil {
			b.Fatal(err)
		}
	}
}

func benchStore(b *testing.B, dir string, sync bool) task.Store {
	b.Helper()
	return openTestStore(b, dir, sync)
}

func benchTask() *task.Task {
	t := testTask("anonymous", time.Now())
	t.Params = json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"x"}}`)
	t.TTL = time.Hour
	return t
}

func BenchmarkStoreCreate(b *testing.B) {
	for _, tc := range []struct {
		name string
		dir  func() string
		sync bool
	}{
		{"memory", func() string { return "" }, false},
		{"disk", b.TempDir, false},
		{"disk-sync", b.TempDir, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := benchStore(b, tc.dir(), tc.sync)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := s.Create(context.Background(), benchTask()); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func BenchmarkStoreGet(b *testing.B) {
	s := benchStore(b, b.TempDir(), false)
	ids := make([]string, 1000)
	for i := range ids {
		t := benchTask()
		if err := s.Create(context.Background(), t); err != nil {
			b.Fatal(err)
		}
		ids[i] = t.ID
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Get(context.Background(), "anonymous", ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkPassThrough is what the gateway adds to a request that is not
// task business: read and parse the body, hand it on.
func BenchmarkPassThrough(b *testing.B) {
	g := testGatewayB(b)
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"resources/read","params":{"uri":"file:///a"}}`)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) })
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		if err := g.ServeHTTP(w, r, next); err != nil {
			b.Fatal(err)
		}
	}
}

func testGatewayB(b *testing.B) *Gateway {
	b.Helper()
	rt := NewRuntime(newMemStore(b))
	b.Cleanup(func() { _ = rt.Close(0) })
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	if err != nil {
		b.Fatal(err)
	}
	return g
}
