package runtime

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The audit log records each task's lifecycle with who did what, for
// operators: never the arguments or results of a call.

// Audit events.
const (
	AuditCreated       = "task created"
	AuditInputRequired = "input requested"
	auditInputAnswered = "input answered"
	auditCompleted     = "task completed"
	auditFailed        = "task failed"
	auditCancelled     = "task cancelled"
	AuditRetrieved     = "task retrieved"
	AuditDenied        = "access denied"
)

// Audit logs one event of task t (nil when the caller may not see it) at
// info level; an AuditRetrieved of a state the caller already read goes to
// debug level ([readSet]).
func (route *Route) Audit(event string, taskID string, t *task.Task, who task.Caller) {
	level := zapcore.InfoLevel
	if event == AuditRetrieved && t != nil {
		// Debug is below info: nothing to do, not even the set's lock,
		// when info is off.
		if !route.auditLog.Core().Enabled(zapcore.InfoLevel) {
			return
		}
		if !route.reads.first(readKey{task: taskID, owner: who.Owner, status: t.Status}) {
			level = zapcore.DebugLevel
		}
	}
	ce := route.auditLog.Check(level, event)
	if ce == nil {
		return
	}
	n := 8
	if t != nil && t.Status == task.StatusFailed {
		n++ // its reason
	}
	fields := make([]zap.Field, 0, n) // one allocation for all of them
	fields = append(fields, zap.String("task", taskID), zap.String("principal", who.Principal), zap.String("tenant", who.Tenant))
	if t != nil {
		fields = append(fields, zap.String("tool", t.Tool), zap.Duration("duration", Now().Sub(t.CreatedAt)), zap.String("status", string(t.Status)))
		if t.Status == task.StatusFailed {
			// Why, as a class (the metrics' reason label): the message
			// may quote the tool's or the upstream's words, which the
			// audit log never holds.
			fields = append(fields, zap.String("reason", string(FailReason(t))))
		}
		if traceID, spanID := t.TraceIDs(); traceID != "" { // the trace of the task's create
			fields = append(fields, zap.String("trace_id", traceID), zap.String("span_id", spanID))
		}
	}
	ce.Write(fields...)
}

// AuditTask logs an event of t on behalf of the principal that owns it,
// records it as a span of the task's trace when it has one (tracing.go),
// and tells the observer of creations.
func (route *Route) AuditTask(event string, t *task.Task) {
	route.Audit(event, t.ID, t, task.Caller{Owner: t.Owner, Principal: t.Principal, Tenant: t.Tenant})
	route.traces.event(route.rt.workers, event, t)
	if event == AuditCreated && route.cfg.Observer != nil {
		route.cfg.Observer.TaskCreated(t.Era)
	}
}

// AuditOutcome logs how a task ended.
func (route *Route) AuditOutcome(t *task.Task) {
	if route.cfg.Observer != nil && t.Status.Terminal() {
		route.cfg.Observer.TaskEnded(t.Era, t.Status, t.UpdatedAt.Sub(t.CreatedAt))
		observeFailure(route.cfg.Observer, t)
	}
	switch t.Status {
	case task.StatusCompleted:
		route.AuditTask(auditCompleted, t)
	case task.StatusFailed:
		route.AuditTask(auditFailed, t)
	case task.StatusCancelled:
		route.AuditTask(auditCancelled, t)
	}
}
