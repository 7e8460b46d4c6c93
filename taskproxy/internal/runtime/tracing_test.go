package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A task keeps its create's trace context, but not a client's tracestate
// beyond what W3C asks to be passed on: it is written with every version
// of the record.
func TestTraceContextOfBoundsState(t *testing.T) {
	t.Parallel()
	long := make([]string, 0, 32)
	for i := range 32 {
		long = append(long, fmt.Sprintf("vendor%02d=%s", i, strings.Repeat("v", 200)))
	}
	atBound := "a=" + strings.Repeat("x", 254) + ",b=" + strings.Repeat("y", maxStoredTraceState-259)
	if len(atBound) != maxStoredTraceState {
		t.Fatalf("the case at the bound has %d bytes", len(atBound))
	}
	tests := []struct {
		name, state, want string
	}{
		{"none", "", ""},
		{"short", "vendor=opaque,other=1", "vendor=opaque,other=1"},
		{"at the bound", atBound, atBound},
		{"over the bound", strings.Join(long, ","), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts, err := trace.ParseTraceState(tt.state)
			if err != nil {
				t.Fatalf("ParseTraceState(%.40q…): %v", tt.state, err)
			}
			sc := trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, TraceState: ts,
			})
			parent, state := TraceContextOf(trace.ContextWithSpanContext(context.Background(), sc))
			if want := "00-01000000000000000000000000000000-0200000000000000-01"; parent != want {
				t.Errorf("traceparent = %q, want %q", parent, want)
			}
			if state != tt.want {
				t.Errorf("tracestate of %d bytes = %d bytes, want %d", len(tt.state), len(state), len(tt.want))
			}
		})
	}
}

// A run without a trace (no span on its request, not a re-run) costs no
// allocation to find out: the span's options are made only for a traced
// run.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestUntracedRunAllocs(t *testing.T) {
	var tr routeTracing
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	tk := &task.Task{ID: "9sle5G8nJypWiKEpw-_TZA", Owner: "alice", Tool: "fast", Era: task.Era2025}
	runs := make([]Run, 51) // AllocsPerRun runs once more, to warm up
	for i := range runs {
		runs[i].Base, runs[i].Ctx = base, context.Background()
	}
	i := 0
	if n := testing.AllocsPerRun(50, func() { tr.startRun(tk, &runs[i]); i++ }); n != 0 {
		t.Errorf("%.0f allocations per untraced run, want none", n)
	}
	if runs[0].span == nil || runs[0].span.SpanContext().IsValid() {
		t.Errorf("an untraced run's span is %#v, want a no-op", runs[0].span)
	}
}
