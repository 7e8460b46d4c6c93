// Package badgerstore is the task store on an embedded Badger database: the
// default backend, for one Caddy process, no setup. It implements
// task.Store with task.AdminLister, task.StatsReporter, task.Deleter (an
// operator's delete of a finished task: [sweeper.DeleteFinished]) and task.Backuper
// (the handle's online backup; Restore loads one into a new directory:
// [handle.Backup]), and value-log garbage collection after sweeps
// (CollectGarbage).
//
// Store is put together from small types, one per concern, whose methods
// it gains by embedding: the handle (the database, the disk guard
// [diskGuard], and the gate that keeps Close out while a call runs); the
// [opening] (this opening's epoch and lease holder); the [committer] (the
// group commit every write of a record or lease goes through, with its
// cache of live records: [committer.readLive]); the writer (creates,
// updates and leases, as writes for the committer); the reader (an
// owner's Get, List and CountActive, reading headers ([handle.readHead])
// and signed cursors ([cursorSigner])); the [storeLister] (every owner's
// tasks, for the admin API and recovery); the [sessions] (session
// bindings); [learned] (what was learned of upstreams); and the [sweeper]
// (expiry and garbage collection). The key layout heads the source of
// [Store]; the format version is checked by [checkFormat].
package badgerstore
