package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Several stores on one schema, each with its own pool, behave as the
// replicas of a scaled-out gateway do: one database, one truth.

func tk(owner string) *task.Task {
	now := time.Now().UTC()
	return &task.Task{ID: task.NewTaskID(), Owner: owner, Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Tool: "t"}
}

// Replicas that start together all migrate the schema without failing, it
// is migrated once, and they share the cursor secret.
func TestConcurrentOpen(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const n = 6
	stores := make([]*pgstore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			stores[i], errs[i] = pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema, MaxConns: 4})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d of %d at once: %v", i+1, n, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	rows, err := admin.Query(context.Background(), "SELECT version FROM "+pgx.Identifier{schema}.Sanitize()+".schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(versions) != fmt.Sprint([]int{1, 2, 3, 4, 5, 6}) || pgstore.SchemaVersion != 6 {
		t.Errorf("migrations recorded %v, want [1 2 3 4 5 6] (schema version %d)", versions, pgstore.SchemaVersion)
	}
	ctx := context.Background()
	for range 3 {
		if err := stores[0].Create(ctx, tk("alice")); err != nil {
			t.Fatal(err)
		}
	}
	_, cursor, err := stores[0].List(ctx, "alice", "", 1)
	if err != nil || cursor == "" {
		t.Fatalf("List: %q, %v", cursor, err)
	}
	holders := map[string]bool{}
	for i, s := range stores {
		if page, _, err := s.List(ctx, "alice", cursor, 10); err != nil || len(page) != 2 {
			t.Errorf("replica %d with replica 0's cursor: %d tasks, %v", i, len(page), err)
		}
		holders[s.Holder()] = true
	}
	if len(holders) != n {
		t.Errorf("%d distinct lease holders among %d replicas", len(holders), n)
	}
}

func TestReplicasShareState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	a, b := open(t, schema), open(t, schema)
	replicas := []*pgstore.Store{a, b}

	// A task created on one replica is visible on the other at once.
	created := tk("alice")
	created.Lease = task.Lease{Holder: a.Holder(), Expires: time.Now().Add(time.Minute)}
	if err := a.Create(ctx, created); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "alice", created.ID); err != nil || got.Lease.Holder != a.Holder() {
		t.Fatalf("replica B reads %+v, %v", got, err)
	}
	if _, err := b.Get(ctx, "bob", created.ID); !errors.Is(err, task.ErrForeign) {
		t.Errorf("bob on replica B: %v, want ErrForeign", err)
	}
	// A's lease holds against B until it expires.
	if _, err := b.Acquire(ctx, "alice", created.ID, b.Holder(), time.Now(), time.Minute); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("B took A's live lease: %v", err)
	}
	if _, err := b.Acquire(ctx, "alice", created.ID, b.Holder(), time.Now().Add(2*time.Minute), time.Minute); err != nil {
		t.Errorf("B could not take A's expired lease: %v", err)
	}
	if _, err := a.Acquire(ctx, "alice", created.ID, a.Holder(), time.Now().Add(2*time.Minute), time.Minute); !errors.Is(err, task.ErrLeaseHeld) {
		t.Errorf("A renewed a lease B took over: %v", err)
	}

	// Compare-and-set across replicas: no update is lost.
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			if _, err := replicas[i%2].Update(ctx, "alice", created.ID, func(t *task.Task) error { t.NextInputKey++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := a.Get(ctx, "alice", created.ID); got.NextInputKey != 30 {
		t.Errorf("%d of 30 updates across replicas landed", got.NextInputKey)
	}
	// One terminal transition wins across replicas.
	var wins atomic.Int32
	for i := range 6 {
		wg.Go(func() {
			_, err := replicas[i%2].Update(ctx, "alice", created.ID, func(t *task.Task) error {
				return t.SetStatus(task.StatusCancelled, fmt.Sprint(i), time.Now())
			})
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, task.ErrTerminal):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d terminal transitions won across replicas, want 1", wins.Load())
	}

	// The quota counts across replicas, atomically with the create.
	var ok, refused atomic.Int32
	for i := range 40 {
		wg.Go(func() {
			err := replicas[i%2].CreateWithin(ctx, tk("carol"), 5)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, task.ErrQuotaExceeded):
				refused.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 5 || refused.Load() != 35 {
		t.Errorf("quota 5 across replicas: %d created, %d refused", ok.Load(), refused.Load())
	}

	// One idempotency key, one task, whichever replica a retry reaches.
	var stored atomic.Int32
	for i := range 10 {
		wg.Go(func() {
			k := tk("dave")
			k.IdempotencyKey, k.Fingerprint = "key", "args"
			err := replicas[i%2].Create(ctx, k)
			var dup *task.DuplicateError
			switch {
			case err == nil:
				stored.Add(1)
			case !errors.As(err, &dup):
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if stored.Load() != 1 {
		t.Errorf("%d tasks stored for one idempotency key across replicas", stored.Load())
	}

	// A session bound on one replica is enforced on the other.
	if err := a.BindSession(ctx, "S1", "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.CheckSession(ctx, "S1", "bob", 0); !errors.Is(err, task.ErrForeign) {
		t.Errorf("bob's use of alice's session on replica B: %v, want ErrForeign", err)
	}
	if err := b.BindSession(ctx, "S1", "bob", time.Hour); !errors.Is(err, task.ErrForeign) {
		t.Errorf("bob binding alice's session on replica B: %v, want ErrForeign", err)
	}
	if err := b.ForgetSession(ctx, "S1"); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckSession(ctx, "S1", "alice", 0); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("a session forgotten on B is still bound on A: %v", err)
	}

	// A sweep on one replica is seen by the other.
	old := tk("erin")
	old.CreatedAt = time.Now().Add(-2 * time.Hour)
	if err := a.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Sweep(ctx, time.Now(), 10); err != nil || n != 1 {
		t.Fatalf("Sweep on B = %d, %v", n, err)
	}
	if _, err := a.Get(ctx, "erin", old.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("A after B's sweep: %v, want ErrExpired", err)
	}
}

// What a closed store wrote is there when it opens again, cursors included.
func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	first, err := pgstore.Open(ctx, pgstore.Options{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for range 3 {
		k := tk("alice")
		if err := first.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, k.ID)
	}
	_, cursor, err := first.List(ctx, "alice", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, schema)
	if second.Holder() == first.Holder() {
		t.Errorf("two openings share the holder %s", first.Holder())
	}
	for _, id := range ids {
		if _, err := second.Get(ctx, "alice", id); err != nil {
			t.Errorf("task %s lost across reopen: %v", id, err)
		}
	}
	if page, _, err := second.List(ctx, "alice", cursor, 10); err != nil || len(page) != 2 {
		t.Errorf("a cursor from before the reopen: %d tasks, %v", len(page), err)
	}
}

// A schema migrated by a newer gateway is refused with a clear error, not
// used.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	open(t, schema)
	if _, err := admin.Exec(context.Background(), "INSERT INTO "+pgx.Identifier{schema}.Sanitize()+".schema_migrations (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "version 999, newer than this gateway knows") {
		t.Errorf("open of a newer schema: %v", err)
	}
}

// The record size limit refuses one write alone, with sizes only in the
// error.
func TestRecordTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := pgstore.Open(ctx, pgstore.Options{DSN: dsn, Schema: newSchema(t), MaxRecordBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	big := tk("alice")
	big.Params = []byte(`{"arguments":"` + strings.Repeat("SECRET", 1000) + `"}`)
	if err := s.Create(ctx, big); !errors.Is(err, task.ErrRecordTooLarge) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("oversized create: %v", err)
	}
	small := tk("alice")
	if err := s.Create(ctx, small); err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(ctx, "alice", small.ID, func(t *task.Task) error { t.Result = big.Params; return nil })
	if !errors.Is(err, task.ErrRecordTooLarge) {
		t.Errorf("oversized update: %v", err)
	}
	if got, err := s.Get(ctx, "alice", small.ID); err != nil || got.Result != nil {
		t.Errorf("after the refused update: %+v, %v", got, err)
	}
}

// A write does not follow the caller's cancellation once it is under way
// (as with Badger): an update whose client already left is stored, not
// half-done. A create is the exception while it still waits for its group
// ([createGroups]): a caller that left before it was taken gets the context's
// error, and nothing is stored.
func TestWriteIgnoresCallerCancel(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dropped := tk("alice")
	if err := s.Create(ctx, dropped); !errors.Is(err, context.Canceled) {
		t.Fatalf("create with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.Get(context.Background(), "alice", dropped.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("the create of a caller that left: Get = %v, want ErrNotFound", err)
	}
	k := tk("alice")
	if err := s.Create(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "alice", k.ID, func(t *task.Task) error { return t.SetStatus(task.StatusCompleted, "", time.Now()) }); err != nil {
		t.Fatalf("update with a cancelled context: %v", err)
	}
	if got, err := s.Get(context.Background(), "alice", k.ID); err != nil || got.Status != task.StatusCompleted {
		t.Errorf("stored %+v, %v", got, err)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, newSchema(t))
	for i := range 3 {
		k := tk("alice")
		if i == 0 {
			k.Status = task.StatusFailed
		}
		if err := s.Create(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Tasks != 3 || st.Active != 2 || st.Bytes <= 0 {
		t.Errorf("Stats = %+v, %v; want 3 tasks, 2 active, some bytes", st, err)
	}
}

// Open fails with an error that names neither the password nor more than
// it must, and does not hang, when the server is not there.
func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bad := "postgres://mcp:s3cret-pw@/mcp_tasks?host=" + t.TempDir() + "&port=1&connect_timeout=5"
	_, err := pgstore.Open(ctx, pgstore.Options{DSN: bad})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("Open of a missing server: %v", err)
	}
	_, err = pgstore.Open(ctx, pgstore.Options{DSN: "postgres://mcp:s3cret-pw@host:notaport/db"})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("Open of a malformed DSN: %v", err)
	}
}
