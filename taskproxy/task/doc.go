// Package task is the model of a durable MCP task and the contract of the
// stores that keep it: the Task record, its status machine, worker leases,
// the Store interface and the optional interfaces beside it, their errors,
// the record encoding, task ids, and the events that tell other processes a
// task changed. The store backends (badgerstore, pgstore) import this package
// and jsonrpc only, never the gateway.
//
// # Status
//
// A task is created working. working and input_required may move to each
// other, or stay, and to any terminal state: completed, failed or cancelled.
// A terminal status never changes, and a cancelled task stays cancelled
// whatever outcome arrives later (CanTransition, ErrTerminal,
// ErrBadTransition).
//
//	working ⇄ input_required
//	   └──────────┴──→ completed | failed | cancelled
//
// # Store rules
//
// A task is durable before its creation is answered. Every lookup takes the
// owner key, and a task of another owner answers exactly like one that never
// existed (ErrNotFound; ErrForeign only for the audit log), without reading
// the task's arguments or result. Transitions are compare-and-set: Update
// re-reads and re-applies on a concurrent change. Creates are bounded per
// owner (Limits: active tasks, and finished tasks kept until their ttl).
// Listings return summaries (Task.Summary), never results. A task past its
// ttl is deleted by Sweep, and its owner is told ErrExpired for one ttl more.
// Task ids carry 128 random bits.
//
// # Leases
//
// A task's worker holds its lease (Lease: holder and expiry), renewed while
// it runs. Another worker takes the task over only when the lease expired or
// its holder is known to be gone, with a compare-and-set (Acquire,
// ErrLeaseHeld), so two workers never run one task; a zero ttl releases the
// lease for anyone.
//
// # Metrics
//
// Observer is told of tasks created, ended and refused; RunObserver, which
// an Observer may also implement, of why tasks failed (FailReason) and of
// tasks taken over (TakeoverCause). TimedStore wraps a Store to tell a
// StoreTimer how long each call took, by StoreOp. Their label sets are
// closed, so that metrics stay bounded.
package task
