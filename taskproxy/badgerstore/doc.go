// Package badgerstore is the task store on an embedded Badger database: the
// default backend, for one Caddy process, no setup. It implements
// task.Store with task.AdminLister, task.StatsReporter, task.Deleter (an
// operator's delete of a finished task: delete.go) and task.Backuper
// (the handle's online backup; Restore loads one into a new directory:
// backup.go), and value-log garbage collection after sweeps
// (CollectGarbage).
//
// Store is put together from small types, one per concern, whose methods
// it gains by embedding: the handle (the database, the disk guard of
// diskguard.go, and the gate that keeps Close out while a call runs); the
// opening (this opening's epoch and lease holder, lease.go); the committer
// (the group commit every write of a record or lease goes through, with
// its cache of live records: commit.go, livecache.go); the writer
// (creates, updates and leases, as writes for the committer); the reader
// (an owner's Get, List and CountActive, reading headers (head.go) and
// signed cursors (cursor.go)); the storeLister (every owner's tasks, for
// the admin API and recovery: admin.go); the sessions (session bindings,
// sessions.go); learned (what was learned of upstreams, learned.go); and the sweeper (expiry and garbage collection, sweep.go).
// The key layout is in store.go, the format version in format.go.
package badgerstore
