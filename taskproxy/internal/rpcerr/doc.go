// Package rpcerr turns the errors of the gateway's work into the JSON-RPC
// errors a client, or a task's stored error, gets. It holds no state: each
// mapper looks only at the error (its type, the store's sentinel errors,
// the upstream call's marks) and logs what the client does not see.
//
// An error is one of:
//
//	a JSON-RPC error                    ──► as it is
//	one of the store's refusals         ──► its text (ClientError)
//	the store unavailable for now       ──► MsgStoreUnavailable, a reference, Unavailable (a 503 with StoreRetryAfter)
//	the gateway's account of an answer  ──► its text (UpstreamFailure)
//	an upstream's failure               ──► its kind (lost, unreachable, failed) and a reference (UpstreamFailure)
//	anything else                       ──► "internal error" and a reference (InternalError)
//
// A reference ties the client's error to the log line with the details,
// which never reach a client: store errors name files and keys, network
// errors addresses. A worker's call that ended without an answer is
// mapped by InterruptedError: its own store operation's failure
// (StoreFailed) as the store's, anything else as the upstream's.
//
// It imports the task model, jsonrpc and the calls to the next handler
// (internal/upstream, for the marks of their failures), never the runtime
// or anything above it (the root's TestImportRules holds the rule).
package rpcerr
