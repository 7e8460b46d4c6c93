// Package v2026 serves the 2026-07-28 tasks extension
// (io.modelcontextprotocol/tasks): server-directed tasks. A tools/call of a
// client that declares the extension runs upstream while the gateway waits
// up to task_after; the upstream's answer passes through, or the call
// becomes a task (Convert). It answers tasks/get, tasks/update and
// tasks/cancel (with the routing headers checked, Mcp-Name taken from
// params.taskId unless strict), subscriptions/listen for task ids, and
// adds the extension to the upstream's server/discover. Upstreams that run
// the extension themselves (their server/discover lists it) are followed:
// their CreateTaskResult becomes the gateway's task.
//
// It imports internal/wire and what is below it, never wire/v2025. The
// version bridge (internal/bridge) uses its exported pieces: Valid, Fail,
// Status, ReadRequestMeta, Reply, Convert, CreateResult.
//
// # A tools/call
//
//	no extension declared ──► tool required: -32021; else passed through
//	                          (on an upstream task runtime: the upstream's task
//	                          awaited, the final result answered)
//	extension declared ──► upstream answers before task_after ──► its answer
//	                   ──► input_required first ──► task in input_required
//	                   ──► task_after passes ──► task stored, CreateTaskResult,
//	                                             the worker keeps the call
//	                   ──► the client leaves ──► upstream call cancelled
package v2026
