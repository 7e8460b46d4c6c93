package follow

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A plain call of a tool that a 2026-07-28 upstream runs only as a task
// (a 2026-07-28 client without the tasks extension, or a 2025-11-25
// client through the reverse version bridge) is sent again declaring the
// extension, and the call waits for the upstream's task within itself. No
// task of the gateway's is made, yet the upstream runs one for the
// caller: both wires admit it as a task (wire.Exchange.AdmitInline),
// bound it by the tool's run_timeout, audit it with the events below, and
// send its creating call detached from the client (PlainV2026TaskCall).

// Audit events of an upstream task a plain client's call waits on.
const (
	AuditPlainCreated = "plain call's task created at the upstream"
	AuditPlainEnded   = "plain call's upstream task ended"
)

// PlainTaskRecord is what the audit log says of the upstream task
// upstreamTaskID that caller's plain call of tool waits on, the gateway's
// own task being none.
func PlainTaskRecord(caller task.Caller, tool, upstreamTaskID string) *task.Task {
	return &task.Task{ID: upstreamTaskID, Owner: caller.Owner, Principal: caller.Principal, Tenant: caller.Tenant,
		Era: task.Era2026, Tool: tool, Status: task.StatusWorking, CreatedAt: time.Now().UTC()}
}

// PlainV2026TaskCall sends body, a plain client's tools/call (upstream id
// id) declaring the tasks extension with params, on base, relaying its
// events to on, and returns its last event. The upstream creates its task
// before it answers, so the call runs detached from the client's request
// (ctx): when ctx ends first (left), the answer is still read in the
// background, for a bounded time (CancelLateV2026Create), the task it
// names is cancelled, and then release gives back the call's slot;
// closing the stream would cancel only the call and leave the task
// running for nobody. When the call is answered, release is the caller's
// to call.
func PlainV2026TaskCall(ctx context.Context, log *zap.Logger, base *http.Request, next http.Handler, id, params json.RawMessage, body []byte, on func(upstream.Event) bool, release func()) (ev upstream.Event, left bool) {
	callCtx, stopCall := context.WithCancel(base.Context())
	a := upstream.StartAttempt(callCtx, base, next, id, body)
	gone := make(chan time.Time)
	stopWatching := context.AfterFunc(ctx, func() { close(gone) })
	ev, answered := a.Until(ctx, upstream.After(gone), on)
	if answered {
		stopWatching()
		stopCall()
		return ev, false
	}
	go func() {
		defer release()
		CancelLateV2026Create(log, a, stopCall, base, next, params)
	}()
	return upstream.Event{Err: context.Cause(ctx)}, true
}
