// Package pgstore is the task.Store on PostgreSQL (pgx/v5 with a
// connection pool), for gateways that run as several replicas: every
// replica opens the same database and sees every task at once.
//
// Layout (one schema, created and migrated by Open; [migrate]):
//
//	tasks       one row per task: indexed columns, the JSON record, and
//	            its summary (what listings show and the owner check reads)
//	leases      the lease of a task (its own row, so a renewal rewrites
//	            a few bytes and not the record)
//	owners      one row per owner that created: the lock that makes the
//	            quota count atomic with the create, and the ceiling of the
//	            owner's finished tasks ([ownerBounds]); the sweep deletes
//	            the rows of owners with no task left ([sweeper.sweepOwners])
//	tombstones  swept tasks, so that their owner learns "expired"
//	sessions    session-to-owner bindings
//	meta        the cursor secret (also the key of the events between
//	            replicas, [sealEvent]), and what was learned of upstreams
//	            ([learned])
//
// Creates and updates are written by group committers ([createGroups],
// [updateGroups]): the writes that wait together share one transaction or
// statement, one commit and, for creates of one owner, one quota lock and
// count, with each write's outcome its own. Finished tasks' records are
// kept in a cache ([finishedCache]): they never change until swept.
//
// Owners and session ids are stored hashed, as in the Badger store. Every
// write is guarded: a task leaves a non-terminal state at most once, and an
// update is a compare-and-set on the row's version.
//
// Store is put together from small types, one per concern, which share
// the database handle (the pool, the schema's SQL, the write deadline and
// the closed flag) and whose methods it gains by embedding: [taskRows]
// (creating, reading and updating a task's row), [lister] (an owner's
// listing with signed cursors, and the active and expired-lease pages of
// recovery and takeover: [lister.ListExpiredLeases]), [adminLister] (every
// owner's tasks for the admin API), [leases], [leadership], [sessions],
// [learned] (what was learned of upstreams), [sweeper] (with an operator's
// delete of a finished task, [sweeper.DeleteFinished]) and events
// (LISTEN/NOTIFY and polling between replicas, [relay], sealed as
// [sealEvent] says).
package pgstore
