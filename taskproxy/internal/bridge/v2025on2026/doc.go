// Package v2025on2026 is the reverse version bridge: 2025-11-25 clients
// (sessions, initialize) in front of an upstream endpoint that speaks only
// 2026-07-28 (its server/discover lists supportedVersions without
// 2025-11-25, as a 2026-07-28 task runtime's does). The root asks it
// whether a 2025-11-25 request is its own (Applies) and hands it over
// (Serve, ServeOther); every other 2025-11-25 request passes through as
// before.
//
// The gateway is the 2025-11-25 server here: it answers initialize itself
// from the upstream's server/discover, opens the session (its own id,
// bound to the caller's owner in the store as any session, so the session
// guard checks every later use), answers ping, logging/setLevel,
// notifications and DELETE, and refuses the GET stream (405). Every other
// request goes upstream in 2026-07-28 form, one stateless request each:
// the 2026-07-28 headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name), no
// session id, and the per-request _meta built from what the session's
// initialize said (client capabilities, client info) and its log level.
// The answer comes back in 2025-11-25 form (internal/translate), its
// progress and log messages relayed on the request's own stream. A
// tools/call the upstream refuses for want of the tasks extension (a tool
// it runs only as a task) is sent again declaring it, and the upstream's
// task is awaited within the client's call (follow.AwaitV2026UpstreamTask).
// That task runs for the caller as a gateway task would: within rate_limit
// and max_active_per_principal (wire.Exchange.AdmitInline), bounded by the
// tool's run_timeout, audited, and its creating call detached from the
// client, so that a client leaving before the upstream names its task
// still gets that task cancelled (follow.PlainV2026TaskCall).
// Input the upstream asks for during a plain call (an InputRequiredResult,
// or the awaited task's inputRequests) goes to the client as 2025-11-25
// requests on the call's stream, the answers back as the call's retry or
// the task's tasks/update ([inputRound]). When that input came before the
// upstream made its task (the guard pattern, in answer to the call
// declaring the extension), each retry may make the task, so each goes as
// that call went: admitted, detached from the client, and its task
// awaited or, the client gone, cancelled:
//
//	input_required ──(requests sent on the stream)──► a round waiting
//	a round waiting ──(every response, on the same session)──► retry / tasks/update
//	a round waiting ──(an error response, 5 min, the client gone)──► the call ends
//	                                                     (the upstream's task cancelled)
//
// Tasks ([call.createTask]): the initialize answer declares the gateway's 2025-11-25
// tasks capability and tools/list each tool's configured task mode; a
// task-augmented tools/call becomes the gateway's 2025-11-25 task whose
// worker calls the upstream in 2026-07-28 form declaring the tasks
// extension and follows the upstream's task (status, input, cancel,
// outcome, restart), after any input the upstream asks before making it
// (relayed on tasks/result, answered as the call's retry); the task
// methods are the 2025-11-25 adapter's. A request naming one of its
// sessions with an MCP-Protocol-Version header of another version than
// 2025-11-25 gets HTTP 400 (RefuseVersion, called by the root before the
// version picks a wire).
//
// It imports internal/wire (the 2025-11-25 adapter among it) and what is
// below it, never wire/v2026 (it serves 2025-11-25 clients) or the root.
//
// # Deciding, per request
//
//	names one of its sessions (SessionPrefix) ──► the reverse bridge
//	names another session ──► passed through (no probe)
//	initialize without a session ──► the endpoint's probe (wire.Probes:
//	    kept ProbeTTL, so once per endpoint per 5 minutes) says 2026-07-28
//	    only ──► the reverse bridge; otherwise passed through
//	anything else without a session ──► the reverse bridge only when a kept
//	    verdict says 2026-07-28 only (never a probe)
//
// # A session
//
//	initialize ──(discover answered; binding and description stored)──► open
//	    (the discover refused: its error; 401/403 passed on with its headers)
//	open ──(any request naming it, by its owner)──► open
//	open ──(another owner names it)──► 404 "Session not found" (the guard)
//	open ──(DELETE)──► ended: binding forgotten, 204; later uses 404
//	open ──(idle gate.SessionIdleTTL)──► ended (the binding expires)
//
// What a session says of its client (capabilities, client info, log
// level) is stored with its binding ([descriptions]) and read by each of its
// requests, so every replica serves the session alike and a restart loses
// nothing; a binding stored without it (by an older build) still works,
// its requests then declaring no client capabilities. The upstream holds
// nothing of it.
package v2025on2026
