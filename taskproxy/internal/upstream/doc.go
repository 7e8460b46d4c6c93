// Package upstream makes the gateway's own calls to the next handler (in
// Caddy, reverse_proxy): a request cloned from a client's, with a detached
// context, values of its own and a streaming writer; the reading of the
// answer, JSON or an event stream, message by message within a size limit;
// and an Attempt, one tools/call in flight, whose events (notifications,
// requests the upstream sends, the final answer or the failure) its holder
// consumes. An attempt decodes its answer as the next handler writes it, on
// the handler's goroutine (answerWriter): a task's call in flight holds
// that one goroutine besides its worker. Other requests (probes,
// cancellations, answers to the upstream's requests) read theirs through
// Call's pipe. A 2025-11-25 stream that ends, or breaks on the upstream's
// side, after an event with an id is resumed with GET and Last-Event-ID, as
// that version allows, as long as the resumes bring new events: ten in a
// row that bring none end the call.
//
// It also names the MCP transport's header fields. It knows nothing of
// tasks.
package upstream
