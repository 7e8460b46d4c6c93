// Package taskruntime is a 2026-07-28 MCP server that runs tools as tasks
// itself, under the tasks extension (io.modelcontextprotocol/tasks). No SDK
// on the registries these machines reach ships such a runtime, so this one
// is written from the extension's text; the gateway's tests put it behind
// the gateway as a task-aware upstream.
//
// # Wire
//
// Only 2026-07-28 over Streamable HTTP, stateless: one POST per request,
// server/discover (advertising the extension), tools/list, tools/call,
// tasks/get, tasks/update, tasks/cancel, and subscriptions/listen with the
// extension's taskIds filter (notifications/tasks on every change; see
// listen.go). Routing headers are checked
// strictly; the order of the checks and their errors are documented on
// checkRequest (headers.go). In short: a missing, malformed or disagreeing
// MCP-Protocol-Version, Mcp-Method or Mcp-Name is 400 with -32020; another
// protocol version, or an initialize, is 400 with -32022; a request
// without the required _meta is 400 with -32602; an unknown method
// (tasks/result and tasks/list included) is 404 with -32601. Errors of a
// request that was handled (task not found, bad arguments) are in-band on
// HTTP 200. Notifications get 202 and are ignored.
//
// # Tasks
//
// Task creation is the server's decision per call, by the tool's mode:
// [ToolSteps] is required (without the extension declared on the request:
// 400 -32021 naming it), [ToolInterview] and [ToolFailJob] are optional
// (a task when the request declares the extension, a plain result
// otherwise), [ToolEcho] is forbidden (never a task). A task is stored
// before its CreateTaskResult (flat, resultType "task") is sent. The
// task methods require the extension on each request (-32021) and answer
// only the caller the task is bound to (by default the Authorization
// header's value; see [Options.BindHeader]); anyone else gets the same
// -32602 as for a task that never existed.
//
// While working, statusMessage says "step k of n". Input is asked with
// inputRequests on tasks/get (status input_required) and answered with
// tasks/update; answers to keys not outstanding are ignored, a partial
// set is kept, and keys are never reused within a task. A JSON-RPC error
// fails the task (error and statusMessage set); a CallToolResult with
// isError:true completes it. tasks/cancel is acknowledged at once and the
// task turns cancelled when its work notices; a call with ignoreCancel
// finishes anyway, which the extension allows. Every task gets
// [Options.TTL] as ttlMs and [Options.PollInterval] as pollIntervalMs. A
// finished task is removed when its TTL runs out (tasks/get then answers
// -32602 "Task has expired" for one more TTL, then "not found"); an
// unfinished one is failed at that point and its ttlMs extended by one TTL.
//
// A plain call that needs input answers with an InputRequiredResult and a
// signed requestState; one that carries a progressToken is answered as an
// SSE stream with a notifications/progress per step.
//
// Two options make it behave as fastmcp-tasks (Python, on Docket) does:
// [Options.IntegralFloats] writes ttlMs, pollIntervalMs, progress and total
// as integral floats (5000.0), and [Options.PickupDelay] starts each task's
// work a little after the task answered working.
//
// # Runtimes that ask first, and undersell their versions
//
// [ToolGuarded] answers any call without its answers (task-augmented or
// not) with an InputRequiredResult before making a task, two rounds, and
// makes its task (or runs plainly) only when the call comes again with
// them. With [Options.AcceptV2025Initialize] a 2025-11-25 initialize is
// answered while server/discover still lists only 2026-07-28.
//
// # A 2025-11-25 task-aware server
//
// With [Options.V2025Tasks] the runtime is a 2025-11-25 server instead,
// one that runs tools as tasks of its own when a tools/call carries
// params.task, as the TypeScript SDK's server does: the CreateTaskResult
// with the Task under "task", tasks/get, tasks/result (blocking) and
// tasks/cancel over the same tasks and work, and no 2026-07-28 at all
// (see v2025.go).
//
// # Restarts
//
// With [Options.StateFile] every change is written to the file, and [New]
// reads it back: task ids, owners (as hashes), tools and arguments,
// status, statusMessage, the step reached, holds, input requests issued
// and answers received, results, errors, cancel requests, timestamps,
// TTLs and expiry tombstones all survive a restart, even a SIGKILL.
// Unfinished work resumes by replaying the tool: steps already reached
// and answers already given are not asked for again. Counters of the
// observer API, holds set with [Server.Hold] for future tasks and the
// requestState key (unless [Options.StateKey] is set) do not survive.
//
// # Observer
//
// Tests read what the runtime saw ([Server.Calls], [Server.Requests],
// [Server.Rejections], [Server.Task], [Server.WaitTask], …) and hold a
// task at a step ([Server.Hold], [Server.Release]); [Server.ControlHandler]
// serves the same over HTTP for a runtime in another process.
package taskruntime
