package taskproxy

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// methodSpans names the span of each task method a client asks the
// gateway, on either protocol version.
var methodSpans = map[string]string{
	"tasks/get":            "mcp.task.get",
	"tasks/result":         "mcp.task.result",
	"tasks/cancel":         "mcp.task.cancel",
	"tasks/update":         "mcp.task.update",
	"tasks/list":           "mcp.task.list",
	"subscriptions/listen": "mcp.task.listen",
}

// attrTaskIDs names the tasks a subscriptions/listen watches.
const attrTaskIDs = attribute.Key("mcp.task.ids")

// traceMethod starts the span of x's task method, a child of the request's
// span, when the request is traced (Caddy's tracing handler ran before the
// gateway): x.R then carries the span, so that a failure the method
// answers is recorded on it (wire.Exchange.Fail). It returns the span's
// end. An untraced request, or another method, costs a context lookup.
func traceMethod(x *wire.Exchange, era task.Era) func() {
	name, ok := methodSpans[x.Msg.Method]
	if !ok || !x.Msg.IsRequest() {
		return func() {}
	}
	ctx := x.R.Context()
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsValid() {
		return func() {}
	}
	attrs := []attribute.KeyValue{runtime.AttrEra.String(string(era))}
	if id, err := wire.StringParam(x.Msg.Params, "taskId"); err == nil && id != "" {
		attrs = append(attrs, runtime.AttrTaskID.String(id))
	}
	if x.Msg.Method == "subscriptions/listen" {
		ids, ok, _ := v2026.ListenTaskIDs(x.Msg.Params)
		if !ok {
			return func() {} // not a listen for tasks: the upstream's
		}
		attrs = append(attrs, attrTaskIDs.String(strings.Join(ids, ",")))
	}
	ctx, span := parent.TracerProvider().Tracer(runtime.TracerName).Start(ctx, name, trace.WithAttributes(attrs...))
	x.R = x.R.WithContext(ctx)
	return func() { span.End() }
}
