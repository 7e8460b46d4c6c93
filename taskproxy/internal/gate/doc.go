// Package gate holds what the gateway checks before it acts on a request,
// and the per-process state of those checks: the fail-closed reading of the
// params members it acts on (no member it reads named twice or in another
// case) and of the body's encoding (UTF-8, no Content-Encoding); the
// rebinding and cross-site checks of the requests it answers itself; rate
// limits and the cap on long-lived answers, per caller; the cache of
// confirmed session bindings; and idempotency keys and fingerprints.
//
// It decides; the caller writes the answer. It knows nothing of tasks or of
// the protocol versions' shapes.
package gate
