// Package wire is what both protocol versions do with a client request:
// the exchange (Exchange: the request, its reader's answer and the
// configuration's services in Env), answering and refusing it (Reply,
// Fail, WriteError with the store's 503), the guards of the task methods
// (DNS rebinding and cross-site posts, the per-owner rate limit, stream
// slots), creating, storing and starting a task (NewTask, StoreTask,
// StartTask, CheckQuota), looking tasks up and answering tasks/get from
// the runtime's view cache, 2025-11-25 session binding (SessionGuard), and
// the tool policy (ToolPolicy: the configured task modes, what the
// upstream declares of its own, and the initialize and tools/list
// rewrites that advertise them).
//
// The version packages below it (wire/v2025, wire/v2026) wrap an Exchange
// in a type of their own and answer their version's methods; the version
// bridge (internal/bridge) uses wire and wire/v2026. wire itself imports
// neither (the root's TestImportRules holds the rule): a third protocol
// version is a new package beside the two, not an edit of this one.
//
// # Session binding
//
// A 2025-11-25 session belongs to the owner whose initialize answer named
// it:
//
//	unbound ──(initialize answered, binding stored first)──► bound to owner
//	bound ──(request of the owner)──► bound (idle ttl extended)
//	bound ──(request of anyone else)──► 404 "Session not found", audited
//	bound ──(DELETE answered 2xx or 404)──► unbound
//
// A binding that cannot be stored withholds the session id from the
// client, so an unbound session is never handed out.
package wire
