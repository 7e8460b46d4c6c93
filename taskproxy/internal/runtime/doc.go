// Package runtime runs tasks: the state of a gateway that outlives one
// configuration. It owns the store, the hub that wakes waiters when a task
// changes, the workers that run tasks' upstream calls, their leases, the
// recovery of tasks a previous process left, the takeover of a dead
// replica's tasks, the orphan pass, the answers to input requests, the
// record of tasks an upstream runs itself (internal/follow's loops follow
// them; a worker's follow.Tracker records what they read), the audit log,
// the cache of
// finished tasks' tasks/get answers (rendered by a function the protocol
// adapters inject), cancellation by a client or an operator, an
// operator's delete of a finished task, and health.
//
// It knows no wire format and no protocol adapter: it imports the task
// model, jsonrpc, the calls to the next handler (internal/upstream), what
// an upstream's own task is and how to ask it (internal/follow), the
// mapping of errors to what a client gets (internal/rpcerr) and the pure
// version translations (internal/translate), never internal/gate, the
// root or an adapter (the root's TestImportRules holds the rule).
//
// # Maintenance loops
//
// Lease renewal, sweeping, settling unsettled outcomes and the orphan
// scan, and takeover each are a small type (leaseRenewal, sweeper,
// orphanLoop, takeoverLoop) whose rounds one ticker paces ([ticker]);
// they start when the store opens and stop when the runtime closes.
//
// # Routes
//
// A Route is one handler instance (a site's mcp_tasks) as the runtime sees
// it: its policy (RouteConfig: how a worker's request is detached, the
// result limit, the tools run again after a restart, the run timeouts,
// loggers, the metrics observer) and the hooks an adapter sets (SessionLost, from the version
// bridge). A route is provisioned (NewRoute), started (Start: the store is
// opened on the first start, the route takes charge of background work and
// of its tasks, recovery runs once), and closed (Close: another started
// route takes charge). Configurations that serve the same route name share
// its tasks: a reload's new route takes over the old one's.
//
// # Task status
//
//	working ──► input_required ──► working ──► completed | failed | cancelled
//
// task.Task.SetStatus guards every transition; the stores refuse to change
// a terminal record (ErrTerminal). A worker records the outcome with
// retries (OutcomeBackoff); one that cannot store even a failure notes the
// task as unsettled for the orphan loop. A task fails on its own at its
// expiry, and at its run timeout ([runTimer]), which counts only the time
// it spends working.
//
// # Leases
//
// A worker holds its task's lease (the route's lease ttl, LeaseTTL by
// default, renewed every third of it: [Leases]), so that a process that
// dies frees its tasks within the ttl:
//
//	free ──Acquire──► held by this process ──renew──► held ...
//	                       │ clean stop: released (ttl 0), announced
//	                       │ process dies: expires
//	                       ▼
//	expired ──Acquire by recovery or another replica's takeover──► held
//
// A process that stops drains first (Drain): it creates no task and takes
// none over while its workers finish; Close then releases the leases of
// what is left and announces the release (task.EventReleased), on which the
// other replicas' takeover passes run at once.
//
// A task whose lease expired is recovered through the route that created
// it: a tool declared retry_on_restart runs again, a 2026-07-28 task that
// waits for input waits on, as does a task waiting for input a 2026-07-28
// upstream asked before making its task (its retry still to send), a task
// the upstream runs is followed again by its recorded id, and anything
// else fails with why (MsgRestarted,
// MsgReplicaLost, MsgRouteGone). A recovered task waits, holding its lease,
// until its route serves a request here (its next handler is what the
// re-run goes through), for up to the route's ResumeWait; then its lease
// is released for a replica whose route serves.
//
// # Tracing
//
// A task keeps the W3C trace context of the request that created it
// (task.Task.TraceParent). Its spans (tracing.go) continue that trace:
// mcp.task.create, mcp.task.input and mcp.task.complete as the audit log
// records those events, and mcp.task.run around the worker, whose upstream
// calls carry the run span's traceparent. A re-run after a restart or a
// takeover starts a new trace whose mcp.task.run span links to the stored
// context. The tracer provider is the request's (Caddy's tracing handler);
// without one, nothing is recorded and nothing is added to the upstream
// calls.
package runtime
