package taskproxy

import (
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
	"go.uber.org/zap"
)

// The audit log records each task's lifecycle with who did what, for
// operators: never the arguments or results of a call.

// Audit events.
const (
	auditCreated       = "task created"
	auditInputRequired = "input requested"
	auditInputAnswered = "input answered"
	auditCompleted     = "task completed"
	auditFailed        = "task failed"
	auditCancelled     = "task cancelled"
	auditRetrieved     = "task retrieved"
	auditDenied        = "access denied"
)

// audit logs one event of task t (nil when the caller may not see it).
func (route *Route) audit(event string, taskID string, t *task.Task, who task.Caller) {
	ce := route.auditLog.Check(zap.InfoLevel, event)
	if ce == nil {
		return
	}
	fields := []zap.Field{zap.String("task", taskID), zap.String("principal", who.Principal), zap.String("tenant", who.Tenant)}
	if t != nil {
		fields = append(fields, zap.String("tool", t.Tool), zap.Duration("duration", clock().Sub(t.CreatedAt)), zap.String("status", string(t.Status)))
	}
	ce.Write(fields...)
}

// auditTask logs an event of t on behalf of the principal that owns it, and
// tells the observer of creations.
func (route *Route) auditTask(event string, t *task.Task) {
	route.audit(event, t.ID, t, task.Caller{Owner: t.Owner, Principal: t.Principal, Tenant: t.Tenant})
	if event == auditCreated && route.cfg.Observer != nil {
		route.cfg.Observer.TaskCreated(t.Era)
	}
}

// auditOutcome logs how a task ended.
func (route *Route) auditOutcome(t *task.Task) {
	if route.cfg.Observer != nil && t.Status.Terminal() {
		route.cfg.Observer.TaskEnded(t.Era, t.Status, t.UpdatedAt.Sub(t.CreatedAt))
	}
	switch t.Status {
	case task.StatusCompleted:
		route.auditTask(auditCompleted, t)
	case task.StatusFailed:
		route.auditTask(auditFailed, t)
	case task.StatusCancelled:
		route.auditTask(auditCancelled, t)
	}
}
