package pgstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// EventChannel is the channel of s's events, for tests that play an
// outsider who learned it.
func EventChannel(s *Store) string { return s.eventChannel }

// GroupCommits is how many group transactions of creates s committed.
func GroupCommits(s *Store) uint64 { return s.groups.groups.Load() }

// QueuedCreates is how many creates wait in s's queue, not yet taken.
func QueuedCreates(s *Store) int { return len(s.groups.queue) }

// HoldGroups makes s's committer wait, once it has the first create of its
// next group (held then closes), until release is called: the creates
// queued meanwhile all go in that group (up to its bound).
func HoldGroups(s *Store) (held <-chan struct{}, release func()) {
	gate, holding := make(chan struct{}), make(chan struct{})
	hook := func() {
		close(holding)
		<-gate
	}
	s.groups.beforeGroup.Store(&hook)
	return holding, func() {
		s.groups.beforeGroup.Store(nil)
		close(gate)
	}
}

// Deadlocks is how many of s's transactions the server broke as deadlocked.
func Deadlocks(s *Store) uint64 { return s.deadlocks.Load() }

// FinishedWalks is how many times s's groups counted an owner's finished
// tasks rather than trusting the owner's ceiling.
func FinishedWalks(s *Store) uint64 { return s.groups.walks.Load() }

// UpdateGroups is how many group statements of updates s committed.
func UpdateGroups(s *Store) uint64 { return s.updates.groups.Load() }

// QueuedUpdates is how many updates wait in s's queue, not yet taken.
func QueuedUpdates(s *Store) int { return len(s.updates.queue) }

// HoldUpdates is HoldGroups for the committer of updates.
func HoldUpdates(s *Store) (held <-chan struct{}, release func()) {
	gate, holding := make(chan struct{}), make(chan struct{})
	hook := func() {
		close(holding)
		<-gate
	}
	s.updates.beforeGroup.Store(&hook)
	return holding, func() {
		s.updates.beforeGroup.Store(nil)
		close(gate)
	}
}

// PreparedPlans sums the generic and custom plans made of the statements
// prepared on the connection the query runs on whose text holds sql
// (pg_prepared_statements, PostgreSQL 14 and later): on a store of one
// connection, all of its statements.
func PreparedPlans(ctx context.Context, s *Store, sql string) (generic, custom int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0)::int8, coalesce(sum(custom_plans), 0)::int8
		FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`, sql).Scan(&generic, &custom)
	return generic, custom, err
}

// ServerSupported says whether a server of version num can hold the store.
var ServerSupported = serverSupported

// PlanSettings are the plan settings the group commit changes, as the
// connection the query runs on has them: on a store of one connection,
// s's.
func PlanSettings(ctx context.Context, s *Store) (string, error) {
	var settings string
	err := s.pool.QueryRow(ctx, "SELECT 'plan_cache_mode=' || current_setting('plan_cache_mode') || ' enable_seqscan=' || current_setting('enable_seqscan')",
		pgx.QueryExecModeSimpleProtocol).Scan(&settings)
	return settings, err
}

// ExplainGeneric explains the generic plan of the statement prepared on
// s's connection whose text holds sql, executed with args (SQL literals):
// the plan that connection has cached, unless the server dropped it.
func ExplainGeneric(ctx context.Context, s *Store, sql, args string) (string, error) {
	var plan []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var name string
		if err := tx.QueryRow(ctx, "SELECT name FROM pg_prepared_statements WHERE strpos(statement, $1) > 0", sql).Scan(&name); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT "+genericPlans); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN EXECUTE "+pgx.Identifier{name}.Sanitize()+"("+args+")", pgx.QueryExecModeSimpleProtocol)
		if err != nil {
			return err
		}
		plan, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return strings.Join(plan, "\n"), err
}

// Migrations are the schema's migrations, by version.
var Migrations = migrations
