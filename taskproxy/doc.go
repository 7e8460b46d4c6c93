// Package taskproxy is the core of caddy-mcp-tasks: an HTTP middleware that
// sits in front of MCP servers and gives them MCP tasks. It reads JSON-RPC
// posts, answers the task methods itself from a durable store, turns
// tools/call requests into tasks run by workers through the next handler,
// and passes everything else through untouched. It serves both task
// protocols: 2025-11-25 (the client asks with params.task; internal/wire/v2025)
// and the 2026-07-28 tasks extension (the gateway decides; internal/wire/v2026),
// bridges 2026-07-28 clients to upstreams that speak only 2025-11-25
// (internal/bridge), and 2025-11-25 clients to upstreams that speak only
// 2026-07-28 (internal/bridge/v2025on2026).
//
// The package imports no Caddy code and no store backend: callers identify
// each request's owner with WithCaller, hand the gateway the next handler as
// an http.Handler (an ErrorHandler, to keep its errors), and open the store
// themselves.
//
// # Layers
//
// Each package imports only those below it (TestImportRules holds the
// rules):
//
//	taskproxy            Config, New, Start, Close, ServeHTTP, the public
//	                     Runtime: reads the body, tells the version apart,
//	                     hands the request to one adapter
//	internal/bridge      2026-07-28 clients in front of 2025-11-25 upstreams
//	internal/bridge/v2025on2026
//	                     2025-11-25 clients in front of 2026-07-28-only
//	                     upstreams (the reverse bridge)
//	internal/wire/v2025, internal/wire/v2026
//	                     each protocol version's methods and renderings
//	internal/wire        the exchange both versions share: answers, guards,
//	                     creating and looking up tasks, session binding,
//	                     the tool policy and discovery rewrites
//	internal/runtime     running tasks: routes, workers, leases, recovery,
//	                     takeover, orphans, input, the hub, audit, views
//	internal/gate        checks before acting: params and encoding read
//	                     fail-closed, origin, rate limits, stream slots,
//	                     the session-binding cache, idempotency
//	internal/upstream    the gateway's own calls to the next handler
//	internal/translate   pure 2025-11-25 to 2026-07-28 translations
//	task                 the task record, its status machine, leases, the
//	                     Store contract (badgerstore and pgstore import it)
//	jsonrpc              messages, errors, the fail-closed body reader
//	internal/jsonx, sse, internal/runners
//	                     JSON scanning and editing, event streams, goroutines
//
// # A request
//
// ServeHTTP starts the store if no request did yet, checks the session the
// request names (a 2025-11-25 session belongs to the owner whose initialize
// answer named it), reads the body with jsonrpc.Parse and the params check
// (or refuses it), and tells the version apart. A tools/call that becomes a
// task is stored before it is answered; its worker (internal/runtime) holds
// the task's lease and runs the call through internal/upstream; other
// processes sharing the store learn of changes through the store's event
// relay. Task methods are
// answered from the store, by their owner only: another owner's task answers
// as one that never existed.
package taskproxy
