package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Opener opens a fresh, empty store for one test. It registers the store's
// Close with t.Cleanup; the suite may close the store itself first, so a
// second Close must return nil.
type Opener func(t *testing.T) task.Store

// Run runs the whole suite against the stores open returns. Each case opens
// its own store and runs in parallel with the others.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(*testing.T, task.Store)
	}{
		{"CreateGet", testCreateGet},
		{"RecordRoundTrip", testRecordRoundTrip},
		{"OwnerIsolation", testOwnerIsolation},
		{"UpdateRules", testUpdateRules},
		{"UpdateImmutableFields", testUpdateImmutableFields},
		{"UpdateConcurrentCAS", testUpdateConcurrent},
		{"TerminalRace", testTerminalRace},
		{"List", testList},
		{"ListSummaries", testListSummaries},
		{"GetSummary", testGetSummary},
		{"ListCursors", testListCursors},
		{"ListCursorSurvivesSweep", testListCursorSurvivesSweep},
		{"CountActive", testCountActive},
		{"ListActive", testListActive},
		{"Idempotency", testIdempotency},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"IdempotencyKeyFreedBySweep", testIdempotencyFreedBySweep},
		{"QuotaConcurrent", testQuotaConcurrent},
		{"QuotaCountsActiveOnly", testQuotaActiveOnly},
		{"IdempotentRepeatAtQuota", testIdempotentRepeatAtQuota},
		{"FinishedBound", testFinishedBound},
		{"QuotaKeys", testQuotaKeys},
		{"QuotaKeysConcurrent", testQuotaKeysConcurrent},
		{"QuotaKeysSweptAndDeleted", testQuotaKeysSweptAndDeleted},
		{"QuotaKeysIdempotency", testQuotaKeysIdempotency},
		{"Leases", testLeases},
		{"LeaseKeptByUpdate", testLeaseKeptByUpdate},
		{"LeaseSetByUpdate", testLeaseSetByUpdate},
		{"LeaseConcurrentClaims", testLeaseConcurrentClaims},
		{"LeaseVersusTerminal", testLeaseVersusTerminal},
		{"LeaseRelease", testLeaseRelease},
		{"Holder", testHolder},
		{"Sweep", testSweep},
		{"SweepBatches", testSweepBatches},
		{"TombstoneExpires", testTombstoneExpires},
		{"Sessions", testSessions},
		{"SessionExpires", testSessionExpires},
		{"SessionBindRace", testSessionBindRace},
		{"SessionDescription", testSessionDescription},
		{"SessionDescriptionExpires", testSessionDescriptionExpires},
		{"Learned", testLearned},
		{"LearnedExpires", testLearnedExpires},
		{"MixedConcurrency", testMixedConcurrency},
		{"Closed", testClosed},
		{"AdminListAll", testAdminListAll},
		{"AdminListAllSparse", testAdminListAllSparse},
		{"AdminGetAny", testAdminGetAny},
		{"DeleteFinished", testDeleteFinished},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

// t0 is a fixed instant for tests that inject the clock: leases and sweeps
// take "now" as an argument, so they need no waiting.
var t0 = time.Unix(1_800_000_000, 0).UTC()

// newTask returns a working task of owner created at created, with a ttl of
// an hour. Times are UTC so that records compare equal after a round trip.
func newTask(owner string, created time.Time) *task.Task {
	created = created.UTC()
	return &task.Task{
		ID: task.NewTaskID(), Owner: owner, Status: task.StatusWorking,
		CreatedAt: created, UpdatedAt: created, TTL: time.Hour, PollInterval: time.Second,
		Era: task.Era2026, Tool: "echo", Params: json.RawMessage(`{"name":"echo","arguments":{"n":1}}`),
	}
}

func mustCreate(t *testing.T, s task.Store, tasks ...*task.Task) {
	t.Helper()
	for _, tk := range tasks {
		if err := s.Create(context.Background(), tk); err != nil {
			t.Fatalf("Create %s: %v", tk.ID, err)
		}
	}
}

func mustGet(t *testing.T, s task.Store, owner, id string) *task.Task {
	t.Helper()
	got, err := s.Get(context.Background(), owner, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return got
}

func setStatus(to task.Status) func(*task.Task) error {
	return func(t *task.Task) error { return t.SetStatus(to, "", t.UpdatedAt.Add(time.Millisecond)) }
}

// isPlainNotFound reports whether err is ErrNotFound and neither of its
// refinements: what a caller must see for a task it may not know exists.
func isPlainNotFound(err error) bool {
	return errors.Is(err, task.ErrNotFound) && !errors.Is(err, task.ErrForeign) && !errors.Is(err, task.ErrExpired)
}

// waitUntil polls cond until it holds or a generous deadline passes; the
// suite never asserts on speed.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
