package runtime

import (
	"context"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// auditOperatorDeleted is the audit event of a delete by an operator.
const auditOperatorDeleted = "task deleted by operator"

// DeleteAsOperator deletes the finished task id before its ttl ends
// (task.Deleter), so that it no longer counts toward its owner's bound on
// finished tasks; its owner then hears "expired" for it, as after the
// sweep. The audit log records the operator who asked. A task still
// running gives ErrNotFinished with the task; a backend that cannot delete
// gives ErrNoDelete, a store not open yet ErrNotReady.
func (op Operator) DeleteAsOperator(ctx context.Context, id, operator string) (*task.Task, error) {
	rt := op.rt
	if !rt.Ready() {
		return nil, task.ErrNotReady
	}
	d, ok := rt.Store.(task.Deleter)
	if !ok {
		return nil, task.ErrNoDelete
	}
	t, err := d.DeleteFinished(ctx, id)
	if err != nil {
		return t, err
	}
	rt.views.forget(id)
	route := rt.RouteFor(t.Route)
	if route == nil { // the route is gone: the route in charge has the logs
		route = rt.routes.inCharge()
	}
	if route != nil {
		if ce := route.auditLog.Check(zap.InfoLevel, auditOperatorDeleted); ce != nil {
			ce.Write(zap.String("task", id), zap.String("principal", t.Principal), zap.String("tenant", t.Tenant),
				zap.String("tool", t.Tool), zap.String("status", string(t.Status)), zap.String("operator", operator))
		}
	}
	return t, nil
}
