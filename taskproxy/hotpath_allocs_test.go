package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// TestTasksGetFinishedAllocs holds what the gateway allocates for a
// 2025-11-25 tasks/get of a finished task answered from its view cache,
// the request a polling client repeats, on a loopback listener, with the
// logs at info level as Caddy's default logger has them: the request's
// body, the GetBody that hands it on again (its reader lives with the
// envelope), and the envelope with its exchange. The answer allocates
// nothing of its own (a pooled buffer; its Content-Type value lives in the exchange),
// nor does the cache lookup (by the id's bytes) or the audit check.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestTasksGetFinishedAllocs(t *testing.T) {
	const want = 3
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	store := newMemStore(t)
	rt := NewRuntime(store)
	t.Cleanup(func() { _ = rt.Close(0) })
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Logger: log, AuditLogger: log.Named("audit")}, rt)
	if err != nil {
		t.Fatal(err)
	}
	done := benchTask()
	done.Status, done.Result = task.StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	if err := store.Create(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, done.ID)
	next := http.NotFoundHandler()
	w := &lastAnswer{header: http.Header{}}
	if err := g.ServeHTTP(w, loopbackRequest(body), next); err != nil || !bytes.Contains(w.body, []byte(`"completed"`)) {
		t.Fatalf("first tasks/get: %v, %s", err, w.body) // reads the store, fills the cache
	}
	const runs = 100
	reqs := make([]*http.Request, runs+1) // AllocsPerRun runs once more, to warm up
	// AllocsPerRun counts every goroutine's allocations, and the runtime's
	// background work allocates now and then: the least of a few rounds is
	// what the request costs.
	allocs := math.Inf(1)
	for range 5 {
		for i := range reqs {
			reqs[i] = loopbackRequest(body)
		}
		i := 0
		allocs = min(allocs, testing.AllocsPerRun(runs, func() {
			if err := g.ServeHTTP(w, reqs[i], next); err != nil {
				t.Fatal(err)
			}
			i++
		}))
	}
	if !bytes.Contains(w.body, []byte(`"completed"`)) {
		t.Fatalf("tasks/get answered %s", w.body)
	}
	if allocs > want {
		t.Errorf("a tasks/get of a finished task made %.0f allocations, want at most %d", allocs, want)
	}
}

// lastAnswer is a ResponseWriter that keeps the last body written.
type lastAnswer struct {
	header http.Header
	body   []byte
}

func (w *lastAnswer) Header() http.Header { return w.header }
func (w *lastAnswer) WriteHeader(int)     {}
func (w *lastAnswer) Write(b []byte) (int, error) {
	w.body = append(w.body[:0], b...)
	return len(b), nil
}
