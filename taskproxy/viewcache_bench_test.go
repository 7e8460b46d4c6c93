package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/cputime"
	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// BenchmarkTasksGetFinished is a 2025-11-25 tasks/get of a finished task
// through the gateway, the polling hot path, over 1000 tasks of a store on
// disk, with the logs at info level as Caddy's default logger has them.
// The requests and the writer are reused, as a server's connection reuses
// its buffers, so that what it measures is the gateway's work.
func BenchmarkTasksGetFinished(b *testing.B) {
	s := benchStore(b, b.TempDir(), false)
	rt := NewRuntime(s)
	b.Cleanup(func() { _ = rt.Close(0) })
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Logger: log, AuditLogger: log.Named("audit")}, rt)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]reusedRequest, 1000)
	for i := range reqs {
		t := benchTask()
		t.Status, t.Result = task.StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
		if err := s.Create(context.Background(), t); err != nil {
			b.Fatal(err)
		}
		reqs[i].body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, t.ID)
		reqs[i].r = loopbackRequest(reqs[i].body)
	}
	next := http.NotFoundHandler()
	w := &lastAnswer{header: http.Header{}}
	b.ReportAllocs()
	cpu := processCPU(b)
	i := 0
	for b.Loop() {
		clear(w.header)
		if err := g.ServeHTTP(w, reqs[i%len(reqs)].reset(), next); err != nil || !bytes.Contains(w.body, []byte(`"completed"`)) {
			b.Fatal(err, string(w.body))
		}
		i++
	}
	cpu.report(b, i)
}

// cpuMeter is the CPU time the process has used since it was made: on
// cores other programs share, wall time per operation says little, its
// CPU time (the collector's included) much more.
type cpuMeter struct{ start time.Duration }

func processCPU(b *testing.B) cpuMeter {
	b.Helper()
	return cpuMeter{start: cpuUsed(b)}
}

// cpuUsed is the CPU time of this process so far.
func cpuUsed(b *testing.B) time.Duration {
	b.Helper()
	used, err := cputime.Process()
	if err != nil {
		b.Fatal(err)
	}
	return used
}

// report adds the CPU time per operation of n operations, cpu-ns/op.
func (m cpuMeter) report(b *testing.B, n int) {
	b.Helper()
	if n > 0 {
		b.ReportMetric(float64(cpuUsed(b)-m.start)/float64(n), "cpu-ns/op")
	}
}

// reusedRequest is a request served again and again, its body read anew
// each time.
type reusedRequest struct {
	r    *http.Request
	body []byte
	rd   readCloser
}

// reset makes the request as it arrived: its whole body unread.
func (q *reusedRequest) reset() *http.Request {
	q.rd.Reset(q.body)
	q.r.Body, q.r.GetBody, q.r.ContentLength = &q.rd, nil, int64(len(q.body))
	return q.r
}

// readCloser is a request body of bytes.
type readCloser struct{ bytes.Reader }

func (*readCloser) Close() error { return nil }

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
