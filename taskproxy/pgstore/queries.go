package pgstore

import "strings"

// queries holds the store's SQL with the schema filled in, built once at
// open. {s} stands for the quoted schema; $n are parameters.
type queries struct {
	lockOwner, countActiveUpTo, countFinishedUpTo    string
	insertTask, taskExists, byIdempotency            string
	get, getOwn, tombstone, forUpdate, cas, casLease string
	getOwnSummary                                    string
	leaseInsert, leaseUpdate, leaseDelete            string
	list, countActive, listActive                    string
	acquire, acquireState                            string
	sweep, sweepTombstones, sweepSessions            string
	sweepOwners                                      string
	deleteFinished                                   string
	bind, check, refresh, forget                     string
	describe, description                            string
	secretInit, secretGet                            string
	learnedSave, learnedLoad                         string
	stats                                            string
	// The group commit of creates ([createGroups]).
	lockTimeout, lockOwners, existingIDs, knownKeys, countOwners, insertTasks, setCeilings string
	// The group commit of updates ([updateGroups]).
	getOwnMany, casMany string
}

// genericPlans makes the statements after it in their transaction (a
// group's, or a batch's implicit one) run generic plans that look rows up
// by index. Left to choose, the server planned several of the group's
// statements anew on every execution (pg_stat_statements over 300 creates:
// per call of existingIDs 87 µs of planning against 12 µs of execution,
// of getOwnMany's earlier join with unnest 188 against 33 µs, of
// setCeilings 73 against 17 µs): their generic plans expect ten ids and so,
// on paper, cost more than a custom plan for the one to three of a group.
// A generic plan stays cached until the table's statistics change, so one
// made while a table was small must not scan it: sequential scans are off
// too, and every statement of a group has an index to go by
// (TestGroupLookupsUseGenericPlans grows the table under cached plans).
// The settings are local: they end with the transaction, and the
// operator's own settings hold for every other statement. With pgx's modes
// that prepare no statement (exec, simple protocol) they save nothing and
// cost little.
const genericPlans = `set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true)`

// active is the SQL test of a non-terminal task.
const active = `status IN ('working', 'input_required')`

// finished is the SQL test of a terminal task, as the partial index
// tasks_finished_quota has it.
const finished = `status NOT IN ('working', 'input_required')`

// quota is the hash a task counts under for the bounds (Task.Quota), as
// the indexes tasks_active_quota and tasks_finished_quota have it.
const quota = `coalesce(quota_hash, owner_hash)`

// taskColumns reads a task with its lease: record, holder, lease expiry.
const taskColumns = `t.record, l.holder, l.expires_ns`

// summaryColumns reads a task's summary with its lease: the record only
// in a row written before summaries.
const summaryColumns = `coalesce(t.summary, t.record), l.holder, l.expires_ns`

func newQueries(schema string) queries {
	r := strings.NewReplacer("{s}", schema, "{active}", active, "{finished}", finished, "{quota}", quota, "{task}", taskColumns, "{summary}", summaryColumns)
	q := queries{
		// The quota lock: the upsert locks the quota's row until commit.
		lockOwner: `INSERT INTO {s}.owners (owner_hash) VALUES ($1)
			ON CONFLICT (owner_hash) DO UPDATE SET owner_hash = EXCLUDED.owner_hash`,
		countActiveUpTo: `SELECT count(*) FROM (SELECT 1 FROM {s}.tasks WHERE {quota} = $1 AND {active} LIMIT $2) c`,
		countFinishedUpTo: `SELECT count(*) FROM (SELECT 1 FROM {s}.tasks
			WHERE {quota} = $1 AND {finished} AND expires_ns > $2 LIMIT $3) c`,
		// A conflict on the id or on the owner's idempotency key inserts
		// nothing; the caller then finds out which.
		insertTask: `WITH ins AS (
				INSERT INTO {s}.tasks (id, owner_hash, status, created_ns, expires_ns, idem_key, fingerprint, version, record, summary, quota_hash)
				VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), $7, 1, $8, $11, $12) ON CONFLICT DO NOTHING RETURNING id),
			l AS (INSERT INTO {s}.leases (task_id, holder, expires_ns) SELECT id, $9, $10 FROM ins WHERE $9 <> '')
			SELECT count(*) FROM ins`,
		taskExists:    `SELECT EXISTS (SELECT 1 FROM {s}.tasks WHERE id = $1)`,
		byIdempotency: `SELECT id, fingerprint FROM {s}.tasks WHERE owner_hash = $1 AND idem_key = $2`,

		get: `SELECT t.owner_hash, t.version, {task} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id WHERE t.id = $1`,
		// The owner's lookup: another owner's row is never fetched.
		getOwn: `SELECT t.owner_hash, t.version, {task} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
			WHERE t.id = $1 AND t.owner_hash = $2`,
		// The owner's lookup of a summary: the record only in a row
		// written before summaries.
		getOwnSummary: `SELECT t.owner_hash, t.version, {summary} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
			WHERE t.id = $1 AND t.owner_hash = $2`,
		tombstone: `SELECT owner_hash FROM {s}.tombstones WHERE task_id = $1 AND expires_ns > $2`,
		forUpdate: `SELECT t.owner_hash, t.version, {task} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
			WHERE t.id = $1 AND t.owner_hash = $2 FOR UPDATE OF t`,
		// The compare-and-set of an update: it lands only on the version
		// read, and only while the task is not terminal. A task becoming
		// terminal loses its lease in the same statement.
		cas: `WITH u AS (
				UPDATE {s}.tasks SET status = $3, idem_key = NULLIF($4, ''), fingerprint = $5, record = $6, summary = $8, version = version + 1
				WHERE id = $1 AND version = $2 AND {active} RETURNING id),
			d AS (DELETE FROM {s}.leases WHERE $7 AND task_id IN (SELECT id FROM u))
			SELECT count(*) FROM u`,
		casLease: `UPDATE {s}.tasks SET status = $3, idem_key = NULLIF($4, ''), fingerprint = $5, record = $6, summary = $7, version = version + 1
			WHERE id = $1 AND version = $2 AND {active}`,
		// An update that changes the lease itself writes it only if it is
		// still the lease the update read.
		leaseInsert: `INSERT INTO {s}.leases (task_id, holder, expires_ns) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		leaseUpdate: `UPDATE {s}.leases SET holder = $4, expires_ns = $5 WHERE task_id = $1 AND holder = $2 AND expires_ns = $3`,
		leaseDelete: `DELETE FROM {s}.leases WHERE task_id = $1 AND holder = $2 AND expires_ns = $3`,

		list: `SELECT t.id, t.created_ns, {summary} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
			WHERE t.owner_hash = $1 AND (t.created_ns, t.id) > ($2, $3) ORDER BY t.created_ns, t.id LIMIT $4`,
		countActive: `SELECT count(*) FROM {s}.tasks WHERE {quota} = $1 AND {active}`,
		listActive: `SELECT t.id, {task} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
			WHERE t.{active} AND t.id > $1 ORDER BY t.id LIMIT $2`,

		// Acquire in one statement: the task row is share-locked, so the
		// end of the task (which deletes the lease) waits for it or goes
		// first; the lease is taken when free, expired or already ours.
		acquire: `WITH t AS (
				SELECT id, record FROM {s}.tasks WHERE id = $1 AND owner_hash = $2 AND {active} FOR SHARE),
			l AS (
				INSERT INTO {s}.leases (task_id, holder, expires_ns) SELECT id, $3, $4 FROM t
				ON CONFLICT (task_id) DO UPDATE SET holder = EXCLUDED.holder, expires_ns = EXCLUDED.expires_ns
				WHERE {s}.leases.holder = EXCLUDED.holder OR {s}.leases.expires_ns <= $5
				RETURNING task_id)
			SELECT t.record FROM t JOIN l ON l.task_id = t.id`,
		acquireState: `SELECT owner_hash, status FROM {s}.tasks WHERE id = $1`,

		// One batch of the sweep: expired tasks go (their leases with
		// them), each leaving a tombstone for its ttl (at least a second)
		// from the wall-clock time of the sweep.
		sweep: `WITH doomed AS (
				SELECT id FROM {s}.tasks WHERE expires_ns <= $1 ORDER BY expires_ns LIMIT $2 FOR UPDATE SKIP LOCKED),
			del AS (
				DELETE FROM {s}.tasks t USING doomed WHERE t.id = doomed.id
				RETURNING t.id, t.owner_hash, t.expires_ns - t.created_ns AS ttl),
			stones AS (
				INSERT INTO {s}.tombstones (task_id, owner_hash, expires_ns)
				SELECT id, owner_hash, $3 + greatest(ttl, 1000000000) FROM del
				ON CONFLICT (task_id) DO UPDATE SET owner_hash = EXCLUDED.owner_hash, expires_ns = EXCLUDED.expires_ns)
			SELECT count(*) FROM del`,
		// An operator's delete of a finished task: as the sweep's, with a
		// tombstone for its ttl (at least a second) from $2.
		deleteFinished: `WITH del AS (
				DELETE FROM {s}.tasks t WHERE t.id = $1 AND t.{finished}
				RETURNING t.id, t.owner_hash, t.expires_ns - t.created_ns AS ttl, t.record),
			stones AS (
				INSERT INTO {s}.tombstones (task_id, owner_hash, expires_ns)
				SELECT id, owner_hash, $2 + greatest(ttl, 1000000000) FROM del
				ON CONFLICT (task_id) DO UPDATE SET owner_hash = EXCLUDED.owner_hash, expires_ns = EXCLUDED.expires_ns)
			SELECT record FROM del`,
		sweepTombstones: `DELETE FROM {s}.tombstones WHERE task_id IN (
			SELECT task_id FROM {s}.tombstones WHERE expires_ns <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		sweepSessions: `DELETE FROM {s}.sessions WHERE session_hash IN (
			SELECT session_hash FROM {s}.sessions WHERE expires_ns <= $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		// One batch of the owners table's sweep (sweep.go): of the rows
		// after $1 (in hash order), up to $2, those whose quota has no task
		// left and that no create has locked go; it returns the last row
		// of the batch and how many the batch read.
		sweepOwners: `WITH c AS (
				SELECT owner_hash FROM {s}.owners WHERE owner_hash > $1 ORDER BY owner_hash LIMIT $2),
			doomed AS (
				SELECT o.owner_hash FROM {s}.owners o WHERE o.owner_hash IN (SELECT owner_hash FROM c)
					AND NOT EXISTS (SELECT 1 FROM {s}.tasks WHERE {quota} = o.owner_hash AND {active})
					AND NOT EXISTS (SELECT 1 FROM {s}.tasks WHERE {quota} = o.owner_hash AND {finished})
				FOR UPDATE OF o SKIP LOCKED),
			del AS (DELETE FROM {s}.owners o USING doomed WHERE o.owner_hash = doomed.owner_hash)
			SELECT (SELECT owner_hash FROM c ORDER BY owner_hash DESC LIMIT 1), (SELECT count(*) FROM c)`,

		// A binding is (re)written when it is free, expired or the owner's.
		bind: `INSERT INTO {s}.sessions (session_hash, owner_hash, expires_ns) VALUES ($1, $2, $3)
			ON CONFLICT (session_hash) DO UPDATE SET owner_hash = EXCLUDED.owner_hash, expires_ns = EXCLUDED.expires_ns,
				description = CASE WHEN {s}.sessions.expires_ns > $4 THEN {s}.sessions.description END
			WHERE {s}.sessions.owner_hash = EXCLUDED.owner_hash OR {s}.sessions.expires_ns <= $4`,
		check:   `SELECT owner_hash FROM {s}.sessions WHERE session_hash = $1 AND expires_ns > $2`,
		refresh: `UPDATE {s}.sessions SET expires_ns = $4 WHERE session_hash = $1 AND owner_hash = $2 AND expires_ns > $3`,
		forget:  `DELETE FROM {s}.sessions WHERE session_hash = $1`,
		// A session's client description, with its live binding ([sessions.DescribeSession]).
		describe:    `UPDATE {s}.sessions SET description = $3 WHERE session_hash = $1 AND owner_hash = $2 AND expires_ns > $4`,
		description: `SELECT owner_hash, description FROM {s}.sessions WHERE session_hash = $1 AND expires_ns > $2`,

		secretInit: `INSERT INTO {s}.meta (key, value) VALUES ('cursor-secret', $1) ON CONFLICT (key) DO NOTHING`,
		secretGet:  `SELECT value FROM {s}.meta WHERE key = 'cursor-secret'`,

		// What was learned of an upstream ([learned]).
		learnedSave: `INSERT INTO {s}.meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`,
		learnedLoad: `SELECT value FROM {s}.meta WHERE key = $1`,

		// The group commit of creates ([createGroups]): its lock timeout; the
		// quota locks of its owners, taken in the order of their hashes; its
		// ids and keys looked up; each owner's tasks counted up to the
		// greatest bound (LIMIT 0 counts none); its rows inserted.
		lockTimeout: `SELECT set_config('lock_timeout', $1, true), ` + genericPlans,
		lockOwners: `INSERT INTO {s}.owners AS o (owner_hash) SELECT h FROM unnest($1::bytea[]) AS u(h) ORDER BY h
			ON CONFLICT (owner_hash) DO UPDATE SET owner_hash = EXCLUDED.owner_hash,
				finished_ceiling = CASE WHEN o.ceiling_xid % 4294967296 = o.xmin::text::bigint THEN o.finished_ceiling END
			RETURNING owner_hash, finished_ceiling, ceiling_from`,
		existingIDs: `SELECT id FROM {s}.tasks WHERE id = ANY($1::text[])`,
		knownKeys: `SELECT t.owner_hash, t.idem_key, t.id, t.fingerprint FROM unnest($1::bytea[], $2::text[]) AS k(h, key)
			JOIN {s}.tasks t ON t.owner_hash = k.h AND t.idem_key = k.key`,
		countOwners: `SELECT
				(SELECT count(*) FROM (SELECT 1 FROM {s}.tasks WHERE {quota} = o.h AND {active} LIMIT o.ma) c),
				(SELECT count(*) FROM (SELECT 1 FROM {s}.tasks WHERE {quota} = o.h AND {finished} AND expires_ns > o.since LIMIT o.mf) c)
			FROM unnest($1::bytea[], $2::int8[], $3::int8[], $4::int8[]) WITH ORDINALITY AS o(h, ma, mf, since, n) ORDER BY o.n`,
		// The ceilings of owners' finished tasks ([ownerBounds]), written with
		// the transaction that wrote them.
		setCeilings: `UPDATE {s}.owners o SET finished_ceiling = u.c, ceiling_from = u.f, ceiling_xid = txid_current()
			FROM unnest($1::bytea[], $2::int8[], $3::int8[]) AS u(h, c, f) WHERE o.owner_hash = u.h`,
		// The rows come sorted (owner, key, id) and are inserted in that
		// order; one taken meanwhile inserts nothing, and then the statement
		// fails (division by zero: fewer rows than $13), so that the COMMIT
		// after it does not run, and the group runs again.
		insertTasks: `WITH r AS (
				SELECT * FROM unnest($1::text[], $2::bytea[], $3::text[], $4::int8[], $5::int8[], $6::text[], $7::text[], $8::bytea[], $9::bytea[], $10::text[], $11::int8[], $12::bytea[])
					WITH ORDINALITY AS r(id, owner_hash, status, created_ns, expires_ns, idem_key, fingerprint, record, summary, holder, lease_ns, quota_hash, n)),
			ins AS (
				INSERT INTO {s}.tasks (id, owner_hash, status, created_ns, expires_ns, idem_key, fingerprint, version, record, summary, quota_hash)
				SELECT id, owner_hash, status, created_ns, expires_ns, NULLIF(idem_key, ''), fingerprint, 1, record, summary, quota_hash FROM r ORDER BY n
				ON CONFLICT DO NOTHING RETURNING id),
			l AS (INSERT INTO {s}.leases (task_id, holder, expires_ns) SELECT r.id, r.holder, r.lease_ns FROM r JOIN ins USING (id) WHERE r.holder <> '')
			SELECT CASE WHEN count(*) = $13 THEN count(*) ELSE 1 / (count(*) - count(*)) END FROM ins`,

		// The group commit of updates ([updateGroups]): the rows read by id and
		// owner; the compare-and-sets, their rows locked in the order of
		// their ids (the version checked again on the row locked; a row
		// locked elsewhere is skipped, its update goes again and then on
		// its own, so that one held row holds up no other), the leases of
		// tasks terminal now deleted.
		getOwnMany: `SELECT t.id, t.owner_hash, t.version, {task} FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
			WHERE t.id = ANY($1::text[]) AND (t.id, t.owner_hash) IN (SELECT * FROM unnest($1::text[], $2::bytea[]))`,
		casMany: `WITH v AS (
				SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bytea[], $8::bool[])
					AS v(id, version, status, idem_key, fingerprint, record, summary, terminal)),
			locked AS (
				SELECT t.id FROM {s}.tasks t JOIN v ON v.id = t.id AND v.version = t.version WHERE t.{active} ORDER BY t.id FOR UPDATE OF t SKIP LOCKED),
			u AS (
				UPDATE {s}.tasks t SET status = v.status, idem_key = NULLIF(v.idem_key, ''), fingerprint = v.fingerprint,
					record = v.record, summary = v.summary, version = t.version + 1
				FROM v WHERE t.id = v.id AND t.version = v.version AND t.id IN (SELECT id FROM locked) RETURNING t.id, v.terminal),
			d AS (DELETE FROM {s}.leases WHERE task_id IN (SELECT id FROM u WHERE terminal))
			SELECT id FROM u`,

		stats: `SELECT (SELECT count(*) FROM {s}.tasks), (SELECT count(*) FROM {s}.tasks WHERE {active}),
			(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
				JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r')`,
	}
	for _, p := range []*string{
		&q.lockOwner, &q.countActiveUpTo, &q.countFinishedUpTo, &q.insertTask, &q.taskExists, &q.byIdempotency,
		&q.get, &q.getOwn, &q.getOwnSummary, &q.tombstone, &q.forUpdate, &q.cas, &q.casLease, &q.leaseInsert, &q.leaseUpdate, &q.leaseDelete,
		&q.list, &q.countActive, &q.listActive, &q.acquire, &q.acquireState,
		&q.sweep, &q.deleteFinished, &q.sweepTombstones, &q.sweepSessions, &q.sweepOwners, &q.bind, &q.check, &q.refresh, &q.forget, &q.describe, &q.description,
		&q.secretInit, &q.secretGet, &q.learnedSave, &q.learnedLoad, &q.stats,
		&q.lockTimeout, &q.lockOwners, &q.existingIDs, &q.knownKeys, &q.countOwners, &q.insertTasks, &q.setCeilings, &q.getOwnMany, &q.casMany,
	} {
		*p = r.Replace(*p)
	}
	return q
}
