// Package bridge is the version bridge: 2026-07-28 clients in front of an
// upstream that speaks only 2025-11-25. The root asks it whether a
// request applies (Applies: the endpoint's probe, a server/discover of the
// gateway's own, says the upstream does not speak 2026-07-28) and hands it
// the request (Serve). It answers on upstream sessions it holds per
// principal, endpoint and client capabilities (a bounded table, fair
// between principals), translates every answer, turns the upstream's
// input requests into input_required (a parked call resumed by the
// client's retry with requestState) or into a task's inputRequests, and
// follows tools the upstream runs as tasks of its own.
//
// It imports internal/wire, wire/v2026 and what is below them, never
// wire/v2025 or the root.
//
// # A probe verdict, per endpoint
//
//	unknown ──(probe answers 2026-07-28)──► speaks 2026 (kept ProbeTTL)
//	unknown ──(probe answers 400, an error)──► 2025 only (kept ProbeTTL)
//	unknown ──(404, 405)──► bridged, not kept ──(a session opens)──► 2025 only
//	unknown ──(401, 403, 5xx, unreachable)──► passed through, not kept
//
// # A bridged tools/call
//
//	upstream asks for input ──► extension declared and the tool may be a task:
//	                            a task in input_required (tasks/update answers)
//	                        ──► otherwise: input_required with requestState,
//	                            the call parked (bridgeParkTimeout) for the retry
//	task_after passes ──► a task, as any 2026-07-28 call
//	upstream drops the session ──► a new session, the request sent again once
package bridge
