package runtime

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Tracing: a task's spans (mcp.task.*) continue the trace of the request
// that created it. The tracer provider is the one of the request's span
// (Caddy's tracing handler's; a no-op one without it, so an untraced
// configuration pays nothing but a context lookup); work without a request
// in hand uses the one the route saw last. The trace context of the create
// is stored with the task (task.Task.TraceParent), so that another process
// continues it: a re-run after a restart, or a takeover, starts a trace of
// its own linked to it.

// TracerName is the instrumentation scope of the gateway's spans.
const TracerName = "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"

// Span names of a task's life.
const (
	SpanCreate   = "mcp.task.create"
	SpanRun      = "mcp.task.run"
	SpanComplete = "mcp.task.complete"
	SpanInput    = "mcp.task.input"
)

// Span attributes.
const (
	AttrTaskID    = attribute.Key("mcp.task.id")
	AttrTool      = attribute.Key("mcp.tool.name")
	AttrEra       = attribute.Key("mcp.protocol.version")
	AttrStatus    = attribute.Key("mcp.task.status")
	AttrRerun     = attribute.Key("mcp.task.rerun")
	attrInputStep = attribute.Key("mcp.task.input.event")
)

// w3c reads and writes the traceparent and tracestate headers.
var w3c propagation.TraceContext

// untracedRun is the span of a run without a trace: made once, since
// converting a noop.Span to the interface allocates.
var untracedRun trace.Span = noop.Span{}

// TraceContextOf returns the W3C traceparent and tracestate of ctx's span,
// or empty strings when ctx has no valid one (an untraced request).
func TraceContextOf(ctx context.Context) (parent, state string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	carrier := propagation.MapCarrier{}
	w3c.Inject(ctx, carrier)
	state = carrier["tracestate"]
	if len(state) > maxStoredTraceState {
		state = "" // the trace goes on without the vendors' entries
	}
	return carrier["traceparent"], state
}

// maxStoredTraceState bounds the tracestate a task keeps: a client's
// header is stored with every write of the record, and OpenTelemetry admits
// 32 entries of up to 512 bytes each. W3C asks that at least 512
// characters be passed on; a longer one is dropped whole, since cutting
// entries could keep a vendor's half.
const maxStoredTraceState = 512

// storedSpanContext is t's stored trace context, invalid when it has none.
func storedSpanContext(t *task.Task) trace.SpanContext {
	if t.TraceParent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": t.TraceParent}
	if t.TraceState != "" {
		carrier["tracestate"] = t.TraceState
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), carrier))
}

// TaskAttributes are the attributes every span of t carries.
func TaskAttributes(t *task.Task) []attribute.KeyValue {
	return []attribute.KeyValue{AttrTaskID.String(t.ID), AttrTool.String(t.Tool), AttrEra.String(string(t.Era)), AttrStatus.String(string(t.Status))}
}

// routeTracing keeps the tracer provider a route's requests were traced
// with, for the spans of work that has no request in hand.
type routeTracing struct {
	last atomic.Pointer[tracerOf]
}

type tracerOf struct{ tp trace.TracerProvider }

// saw notes the tracer provider of a request the route served, when it was
// traced.
func (rt *routeTracing) saw(r *http.Request) {
	span := trace.SpanFromContext(r.Context())
	if !span.SpanContext().IsValid() {
		return
	}
	tp := span.TracerProvider()
	if cur := rt.last.Load(); cur == nil || cur.tp != tp {
		rt.last.Store(&tracerOf{tp: tp})
	}
}

// tracer is the tracer of the provider the route saw last, a no-op one
// before any traced request.
func (rt *routeTracing) tracer() trace.Tracer {
	if cur := rt.last.Load(); cur != nil {
		return cur.tp.Tracer(TracerName)
	}
	return noop.NewTracerProvider().Tracer(TracerName)
}

// event records an audited event of t as a span of its trace: the create,
// an input round, the outcome. A task without a stored trace context has
// none. The span is a child of the task's run span when a worker of this
// process runs it (in workers), or else of the stored context of its
// create.
func (tr *routeTracing) event(workers *workerTable, event string, t *task.Task) {
	if t.TraceParent == "" {
		return
	}
	var name string
	attrs := TaskAttributes(t)
	switch event {
	case AuditCreated:
		name = SpanCreate
	case AuditInputRequired:
		name = SpanInput
		attrs = append(attrs, attrInputStep.String("requested"))
	case auditInputAnswered:
		name = SpanInput
		attrs = append(attrs, attrInputStep.String("answered"))
	case auditCompleted, auditFailed, auditCancelled:
		name = SpanComplete
	default:
		return
	}
	tracer, parent := tr.tracer(), trace.ContextWithRemoteSpanContext(context.Background(), storedSpanContext(t))
	var run trace.Span
	if r, ok := workers.get(t.ID); ok && r.span != nil && r.span.SpanContext().IsValid() {
		run = r.span
		tracer, parent = run.TracerProvider().Tracer(TracerName), trace.ContextWithSpan(context.Background(), run)
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if name == SpanCreate {
		opts = append(opts, trace.WithTimestamp(t.CreatedAt))
	}
	_, span := tracer.Start(parent, name, opts...)
	if t.Status == task.StatusFailed {
		msg := t.StatusMessage
		if t.Error != nil {
			msg = t.Error.Message
		}
		span.SetStatus(codes.Error, msg)
		if run != nil {
			run.SetStatus(codes.Error, msg)
		}
	}
	if run != nil && name == SpanComplete {
		run.SetAttributes(AttrStatus.String(string(t.Status)))
	}
	span.End()
}

// TraceRun starts run's mcp.task.run span for t, once: a child of the
// span of the request run was made from, or, for a re-run after a restart
// or a takeover (no request of the task in hand), a new trace linked to
// the task's stored context. The upstream calls made on run afterwards
// carry the span's traceparent, in place of the one of the request the
// run was copied from, so that the upstream's spans join the trace. Call
// it before the run's first upstream call; StartWorker calls it too.
func TraceRun(route *Route, t *task.Task, run *Run) { route.traces.startRun(t, run) }

// startRun is TraceRun.
func (tr *routeTracing) startRun(t *task.Task, run *Run) {
	if run.span != nil {
		return
	}
	base := run.Base.Context()
	reqSpan := trace.SpanFromContext(base)
	// The options, the task's attributes first, are made only for a run
	// that is traced: most are not, and every run comes here.
	var tracer trace.Tracer
	var opts []trace.SpanStartOption
	switch {
	case task.IsRerun(base):
		// The base is a request another caller made: its span is not the
		// task's parent.
		tracer = tr.tracer()
		opts = []trace.SpanStartOption{trace.WithAttributes(TaskAttributes(t)...), trace.WithNewRoot(), trace.WithAttributes(AttrRerun.Bool(true))}
		if stored := storedSpanContext(t); stored.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: stored}))
		}
	case reqSpan.SpanContext().IsValid():
		tracer = reqSpan.TracerProvider().Tracer(TracerName)
		opts = []trace.SpanStartOption{trace.WithAttributes(TaskAttributes(t)...)}
	default:
		run.span = untracedRun
		return
	}
	ctx, span := tracer.Start(run.Ctx, SpanRun, opts...)
	run.span = span
	if !span.SpanContext().IsValid() {
		return
	}
	run.Ctx = ctx
	release := run.Release
	run.Release = func() {
		span.End()
		release()
	}
	b := run.Base.WithContext(trace.ContextWithSpan(base, span))
	b.Header = run.Base.Header.Clone()
	w3c.Inject(ctx, propagation.HeaderCarrier(b.Header))
	run.Base = b
}
