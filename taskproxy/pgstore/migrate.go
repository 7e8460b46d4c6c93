package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Versioned migrations. Open applies, in one transaction, those the schema
// has not had yet, under a transaction-level advisory lock: replicas that
// start together wait for each other, and the lock ends with the
// transaction, so it works through transaction-pooling proxies too. A
// migration is never edited once released; a change is a new one.
//
// {s} stands for the quoted schema name.
var migrations = []string{
	1: `
CREATE TABLE {s}.meta (
	key   text PRIMARY KEY,
	value bytea NOT NULL
);
CREATE TABLE {s}.tasks (
	id          text COLLATE "C" PRIMARY KEY,
	owner_hash  bytea  NOT NULL,
	status      text   NOT NULL,
	created_ns  bigint NOT NULL,
	expires_ns  bigint NOT NULL,
	idem_key    text,
	fingerprint text   NOT NULL DEFAULT '',
	version     bigint NOT NULL,
	record      bytea  NOT NULL
);
CREATE INDEX tasks_owner_created ON {s}.tasks (owner_hash, created_ns, id);
CREATE INDEX tasks_active_owner ON {s}.tasks (owner_hash) WHERE status IN ('working', 'input_required');
CREATE INDEX tasks_active_id ON {s}.tasks (id) WHERE status IN ('working', 'input_required');
CREATE INDEX tasks_expires ON {s}.tasks (expires_ns);
CREATE UNIQUE INDEX tasks_idempotency ON {s}.tasks (owner_hash, idem_key) WHERE idem_key IS NOT NULL;
CREATE TABLE {s}.leases (
	task_id    text COLLATE "C" PRIMARY KEY REFERENCES {s}.tasks (id) ON DELETE CASCADE,
	holder     text   NOT NULL,
	expires_ns bigint NOT NULL
);
CREATE TABLE {s}.owners (
	owner_hash bytea PRIMARY KEY
);
CREATE TABLE {s}.tombstones (
	task_id    text COLLATE "C" PRIMARY KEY,
	owner_hash bytea  NOT NULL,
	expires_ns bigint NOT NULL
);
CREATE INDEX tombstones_expires ON {s}.tombstones (expires_ns);
CREATE TABLE {s}.sessions (
	session_hash bytea PRIMARY KEY,
	owner_hash   bytea  NOT NULL,
	expires_ns   bigint NOT NULL
);
CREATE INDEX sessions_expires ON {s}.sessions (expires_ns);
`,
	// Leaderships ([leadership]): one row per duty that one replica does for
	// all, such as sweeping; and the index the takeover of expired leases
	// reads ([lister.ListExpiredLeases]).
	2: `
CREATE TABLE {s}.leaders (
	name       text PRIMARY KEY,
	holder     text   NOT NULL,
	expires_ns bigint NOT NULL
);
CREATE INDEX leases_expires ON {s}.leases (expires_ns);
`,
	// A task's summary (Task.Summary) beside its record: listings and the
	// owner check read it and never the record. Rows of earlier versions
	// have none, and are read whole. The index counts an owner's finished
	// tasks for their bound.
	3: `
ALTER TABLE {s}.tasks ADD COLUMN summary bytea;
CREATE INDEX tasks_finished_owner ON {s}.tasks (owner_hash, expires_ns) WHERE status NOT IN ('working', 'input_required');
`,
	// The ceiling of an owner's finished tasks ([ownerBounds]): a bound of
	// their count kept on the owner's row, the time from which it holds,
	// and the transaction that wrote it.
	4: `
ALTER TABLE {s}.owners ADD COLUMN finished_ceiling bigint, ADD COLUMN ceiling_from bigint, ADD COLUMN ceiling_xid bigint;
`,
	// What a session's client said of itself ([sessions.DescribeSession]), kept with
	// its binding. Bindings of earlier versions have none.
	5: `
ALTER TABLE {s}.sessions ADD COLUMN description bytea;
`,
	// A task's quota (Task.Quota) when it is not its owner: the hash of
	// its QuotaKey (an anonymous caller's client address). The bounds count
	// coalesce(quota_hash, owner_hash), so rows of earlier versions count
	// under their owner; the counts' indexes move to that expression, and
	// the owners table's rows (the quota locks and their ceilings) are
	// quotas' from now on.
	6: `
ALTER TABLE {s}.tasks ADD COLUMN quota_hash bytea;
CREATE INDEX tasks_active_quota ON {s}.tasks ((coalesce(quota_hash, owner_hash))) WHERE status IN ('working', 'input_required');
CREATE INDEX tasks_finished_quota ON {s}.tasks ((coalesce(quota_hash, owner_hash)), expires_ns) WHERE status NOT IN ('working', 'input_required');
DROP INDEX {s}.tasks_active_owner;
DROP INDEX {s}.tasks_finished_owner;
`,
}

// SchemaVersion is the schema version this build migrates to.
var SchemaVersion = len(migrations) - 1

// lockKey is the advisory lock of a schema's migrations.
func lockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("caddy-mcp-tasks/pgstore/" + schema))
	return int64(h.Sum64())
}

// minServerVersion is the oldest PostgreSQL the store runs on (as
// server_version_num): 12, for plan_cache_mode, which the group commit sets
// ([queries], genericPlans).
const minServerVersion = 120000

// serverVersionQuery reads the server's version as a number and in words.
const serverVersionQuery = "SELECT current_setting('server_version_num')::int, current_setting('server_version')"

// checkServer refuses a server older than minServerVersion when the store
// opens, rather than failing every group of writes later.
func checkServer(ctx context.Context, pool *pgxpool.Pool) error {
	var num int
	var version string
	if err := pool.QueryRow(ctx, serverVersionQuery).Scan(&num, &version); err != nil {
		return fmt.Errorf("pgstore: reading the server's version: %w", err)
	}
	return serverSupported(num, version)
}

// serverSupported says whether a server of version num (version in words)
// can hold the store.
func serverSupported(num int, version string) error {
	if num < minServerVersion {
		return fmt.Errorf("pgstore: PostgreSQL %s is older than 12, the oldest this store runs on: %w", version, ErrServerTooOld)
	}
	return nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	quoted := pgx.Identifier{schema}.Sanitize()
	err := pgx.BeginTxFunc(ctx, pool, readCommitted, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey(schema)); err != nil {
			return fmt.Errorf("taking the migration lock: %w", err)
		}
		// CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even
		// when the schema exists: a user given only its own schema by a DBA
		// must not need it.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			return fmt.Errorf("looking for schema %s: %w", quoted, err)
		}
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+quoted); err != nil {
				return fmt.Errorf("creating schema %s: %w", quoted, err)
			}
		}
		if _, err := tx.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+quoted+".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
			return fmt.Errorf("creating the migrations table: %w", err)
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+quoted+".schema_migrations").Scan(&current); err != nil {
			return fmt.Errorf("reading the schema version: %w", err)
		}
		if current > SchemaVersion {
			return fmt.Errorf("schema %s is at version %d, newer than this gateway knows (%d): %w", quoted, current, SchemaVersion, ErrSchemaNewer)
		}
		for v := current + 1; v <= SchemaVersion; v++ {
			if _, err := tx.Exec(ctx, strings.ReplaceAll(migrations[v], "{s}", quoted)); err != nil {
				return fmt.Errorf("applying migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+quoted+".schema_migrations (version) VALUES ($1)", v); err != nil {
				return fmt.Errorf("recording migration %d: %w", v, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: migrating: %w", err)
	}
	return nil
}
