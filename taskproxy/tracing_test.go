package taskproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// traceUpstream is a next handler that answers tools/list and tools/call
// (after release is closed) and records the traceparent of each
// tools/call it receives.
type traceUpstream struct {
	mu      sync.Mutex
	parents []string
	release chan struct{}
}

func (u *traceUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if msg.Method == "tools/list" {
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]}}`, msg.ID)
		return
	}
	u.mu.Lock()
	u.parents = append(u.parents, r.Header.Get("Traceparent"))
	u.mu.Unlock()
	<-u.release
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"done"}]}}`, msg.ID)
}

func (u *traceUpstream) received() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.parents...)
}

// traced returns r in a server span of tp, with the span's traceparent
// set on its headers, as Caddy's tracing handler passes a request on.
func traced(r *http.Request, tp trace.TracerProvider) (*http.Request, trace.Span) {
	ctx, span := tp.Tracer("caddy").Start(r.Context(), "mcp", trace.WithSpanKind(trace.SpanKindServer))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return r.WithContext(ctx), span
}

func spanNamed(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

func hasAttr(s sdktrace.ReadOnlySpan, kv attribute.KeyValue) bool {
	return slices.Contains(s.Attributes(), kv)
}

// A traced create continues one trace through the task's life: the
// record keeps the create's trace context, the background upstream call
// carries the traceparent of the task's mcp.task.run span (not the one of
// the create request), the completion is a span under the run, and a
// later tasks/get is a span with the task id. Untraced, the gateway adds no
// traceparent and stores none.
func TestTaskTrace(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("traced=%v", on), func(t *testing.T) {
			t.Parallel()
			recorder := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
			g := testGateway(t, Config{})
			up := &traceUpstream{release: make(chan struct{})}
			req := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000}}}`)
			var server trace.Span
			if on {
				req, server = traced(req, tp)
			}
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, req, up); err != nil {
				t.Fatal(err)
			}
			if server != nil {
				server.End()
			}
			var created struct {
				Result struct {
					Task struct{ TaskID string } `json:"task"`
				} `json:"result"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || created.Result.Task.TaskID == "" {
				t.Fatalf("create answer %s", rec.Body)
			}
			id := created.Result.Task.TaskID
			close(up.release)
			done := waitStatus(t, g, task.Anonymous, id, task.StatusCompleted)

			get := post(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":%q}}`, id))
			var getServer trace.Span
			if on {
				get, getServer = traced(get, tp)
				defer getServer.End()
			}
			if err := g.ServeHTTP(httptest.NewRecorder(), get, up); err != nil {
				t.Fatal(err)
			}

			parents := up.received()
			if len(parents) != 1 {
				t.Fatalf("upstream tools/call traceparents %q, want one call", parents)
			}
			if !on {
				if parents[0] != "" || done.TraceParent != "" || len(recorder.Ended()) != 0 {
					t.Fatalf("untraced: upstream traceparent %q, stored %q, spans %d; want none", parents[0], done.TraceParent, len(recorder.Ended()))
				}
				return
			}
			traceID := server.SpanContext().TraceID().String()
			if want := "00-" + traceID + "-" + server.SpanContext().SpanID().String() + "-01"; done.TraceParent != want {
				t.Errorf("stored traceparent %q, want the create request's %q", done.TraceParent, want)
			}
			var runSpan, completeSpan, createSpan, getSpan sdktrace.ReadOnlySpan
			waitFor(t, "spans mcp.task.run, mcp.task.complete, mcp.task.get", func() bool {
				ended := recorder.Ended()
				runSpan, completeSpan, createSpan, getSpan = spanNamed(ended, "mcp.task.run"), spanNamed(ended, "mcp.task.complete"), spanNamed(ended, "mcp.task.create"), spanNamed(ended, "mcp.task.get")
				return runSpan != nil && completeSpan != nil && getSpan != nil
			})
			if createSpan == nil || createSpan.Parent().SpanID() != server.SpanContext().SpanID() {
				t.Errorf("mcp.task.create %v: want a child of the request's span", createSpan)
			}
			if runSpan.Parent().SpanID() != server.SpanContext().SpanID() || runSpan.SpanContext().TraceID().String() != traceID {
				t.Errorf("mcp.task.run parent %s: want the request's span %s", runSpan.Parent().SpanID(), server.SpanContext().SpanID())
			}
			if want := "00-" + traceID + "-" + runSpan.SpanContext().SpanID().String() + "-01"; parents[0] != want {
				t.Errorf("upstream got traceparent %q, want the run span's %q", parents[0], want)
			}
			if completeSpan.Parent().SpanID() != runSpan.SpanContext().SpanID() || !hasAttr(completeSpan, attribute.String("mcp.task.status", "completed")) {
				t.Errorf("mcp.task.complete parent %s attrs %v: want under the run, status completed", completeSpan.Parent().SpanID(), completeSpan.Attributes())
			}
			if !hasAttr(getSpan, attribute.String("mcp.task.id", id)) || !hasAttr(runSpan, attribute.String("mcp.task.id", id)) {
				t.Errorf("task id attribute missing: get %v, run %v", getSpan.Attributes(), runSpan.Attributes())
			}
			if getSpan.Parent().SpanID() != getServer.SpanContext().SpanID() {
				t.Errorf("mcp.task.get parent %s, want its request's span %s", getSpan.Parent().SpanID(), getServer.SpanContext().SpanID())
			}
		})
	}
}

// BenchmarkCreateTraced is what tracing adds to a task's create and run
// through the gateway: off (no span in the request, Caddy without the
// tracing directive) and on (a span per request, sampled and recorded,
// exported to nowhere). The worker runs in the background, so its cost
// shows as contention as well as in allocations.
func BenchmarkCreateTraced(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("traced=%v", on), func(b *testing.B) {
			g := testGatewayB(b)
			tp := sdktrace.NewTracerProvider() // records every span, exports none
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				msg, _ := jsonrpc.Parse(body)
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[]}}`, msg.ID)
			})
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000}}}`
			b.ReportAllocs()
			for b.Loop() {
				r := post(body)
				var span trace.Span
				if on {
					r, span = traced(r, tp)
				}
				if err := g.ServeHTTP(httptest.NewRecorder(), r, up); err != nil {
					b.Fatal(err)
				}
				if span != nil {
					span.End()
				}
			}
			b.StopTimer()
			// Every task's worker ends before the store closes.
			waitFor(b, "every task's worker to end", func() bool { return g.rt.RunningWorkers() == 0 })
		})
	}
}

// A task method answered with an error, on either protocol version, is a
// span named for the method with the task id, whose status is the error.
func TestTaskMethodSpanError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, span, body string
		headers          []string
		era              string
	}{
		{"2025-11-25 tasks/get", "mcp.task.get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"nope"}}`, nil, "2025-11-25"},
		{"2025-11-25 tasks/cancel", "mcp.task.cancel", `{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"nope"}}`, nil, "2025-11-25"},
		{"2026-07-28 tasks/get", "mcp.task.get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"nope",` + declaring + `}}`,
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tasks/get", "Mcp-Name", "nope"}, "2026-07-28"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			recorder := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
			g := testGateway(t, Config{})
			req, server := traced(post(tt.body, tt.headers...), tp)
			if err := g.ServeHTTP(httptest.NewRecorder(), req, http.NotFoundHandler()); err != nil {
				t.Fatal(err)
			}
			server.End()
			s := spanNamed(recorder.Ended(), tt.span)
			if s == nil {
				t.Fatalf("no %s span among %d", tt.span, len(recorder.Ended()))
			}
			if s.Parent().SpanID() != server.SpanContext().SpanID() {
				t.Errorf("%s parent %s, want the request's span", tt.span, s.Parent().SpanID())
			}
			if !hasAttr(s, attribute.String("mcp.task.id", "nope")) || !hasAttr(s, attribute.String("mcp.protocol.version", tt.era)) {
				t.Errorf("%s attributes %v", tt.span, s.Attributes())
			}
			if s.Status().Code != codes.Error || !hasAttr(s, attribute.Int("rpc.jsonrpc.error_code", jsonrpc.CodeInvalidParams)) {
				t.Errorf("%s status %v attributes %v, want the -32602 error", tt.span, s.Status(), s.Attributes())
			}
		})
	}
}
