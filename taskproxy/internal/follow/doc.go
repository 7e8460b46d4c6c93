// Package follow follows tasks that upstreams run themselves: it reads the
// answer that creates an upstream's task, asks the upstream about that task
// (tasks/result, tasks/get, tasks/update, tasks/cancel) with the headers
// and _meta each protocol version requires, and says what the upstream's
// task has become. It holds no task store and no worker: the runtime's
// worker, which owns the gateway's own task, records what this package
// reads; a plain client's call that waits for an upstream's task within
// itself uses it directly.
//
// It imports the task model, jsonrpc, the calls to the next handler
// (internal/upstream), the error mappers (internal/rpcerr) and the pure
// version translations (internal/translate), never the runtime or
// anything above it (the root's TestImportRules holds the rule).
//
// # An upstream's task
//
// The gateway sends the tools/call that asks the upstream for a task
// (UpstreamCallBody: params.task on 2025-11-25; on 2026-07-28 the call
// declares the tasks extension) and reads the answer:
//
//	call sent ──answer──► created (ReadV2026Created, ReadV2025Created)
//	    │                    │
//	    │ plain result       ▼
//	    │ or error      followed ──poll / tasks/result──► working | input_required
//	    ▼                    │                               │ answers: tasks/update
//	 the call's outcome      ▼                               ▼
//	                    completed | failed | cancelled    followed ...
//	                    (the upstream's outcome)
//	                         or gone (-32602: the upstream no longer knows
//	                         it, msgUpstreamTaskGone), or too many failed
//	                         asks in a row (maxFollowFailures)
//
// The worker of the gateway's task runs the loop of its version (Loop's
// V2025 and V2026) with a Tracker, the seam to the runtime, which owns the
// task's record: the loop asks the upstream and hands the tracker what it
// learns (a status message, input requests, the outcome), and takes the
// client's answers from it; when the worker's context ends first, the
// tracker is told why (Interrupt). On 2025-11-25 the loop waits in
// tasks/result (whose stream carries the upstream's input requests) and
// polls tasks/get beside it for the status message; on 2026-07-28 it
// polls tasks/get, and sends the client's answers with tasks/update as
// soon as the tracker has them.
//
// A 2026-07-28 upstream's task is polled with tasks/get at its
// pollIntervalMs, kept within bounds (pollEvery, clampV2026Poll); its
// numbers are read as JSON Schema reads an integer, and an odd one is
// logged at debug level (LogOddNumber), never refused. Its status message
// is kept bounded (UpstreamStatusMessage).
//
// # A call whose caller is gone before the upstream's task
//
// Closing the creating call's stream cancels the call, not the task the
// upstream makes for it, and on 2025-11-25 notifications/cancelled must
// not be used for a task at all. A call whose caller is gone before its
// answer is therefore read on, for at most CreateGrace, and the task a
// CreateTaskResult names is cancelled: for a plain client's call
// (CancelLateV2026Create; the gateway makes such calls only of a
// 2026-07-28 upstream), and, in the runtime, for the call of a gateway's
// task that ended meanwhile (cancelled, run_timeout, expiry), on either
// version (ReadV2026Created or ReadV2025Created reads the answer, Loop's
// Cancel sends the tasks/cancel of the task's version):
//
//	call in flight ──caller gone──► read on (≤ CreateGrace) ──CreateTaskResult──► tasks/cancel
//	                                      │ error, plain result, no answer
//	                                      ▼
//	                                 nothing to stop
//
// # Awaited within a call
//
// A client that cannot address a task (a plain 2026-07-28 call, a
// 2025-11-25 client through the reverse bridge) still gets a tool that the
// upstream runs only as a task: PlainV2026TaskCall sends the call detached
// from the client, AwaitV2026UpstreamTask polls the upstream's task until
// it ends or asks for input (InlineOutcome), AnswerV2026UpstreamTask sends
// the client's answers, and CancelV2026UpstreamTask cancels a task nobody
// waits for any more.
package follow
