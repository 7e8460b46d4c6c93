package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The group commit of creates ([createGroups]), with a real PostgreSQL.

// createHeld queues creates on s while its committer is held, so that they
// all go in one group (the first one taken, the rest queued), then releases
// it and returns each create's error.
func createHeld(t *testing.T, s *pgstore.Store, tasks []*task.Task, limits []task.Limits) []error {
	t.Helper()
	held, release := pgstore.HoldGroups(s)
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = s.CreateWithinLimits(context.Background(), tasks[0], limits[0]) })
	<-held // the first is taken: the committer holds
	for i := 1; i < len(tasks); i++ {
		wg.Go(func() { errs[i] = s.CreateWithinLimits(context.Background(), tasks[i], limits[i]) })
	}
	waitFor(t, func() bool { return pgstore.QueuedCreates(s) == len(tasks)-1 })
	release()
	wg.Wait()
	return errs
}

// waitFor polls cond, a state of the store's queues, until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	waitUntil(t, "the store's queues", time.Millisecond, cond)
}

// waitUntil polls cond every interval until it holds; a condition that
// never comes fails the test after a generous deadline rather than
// hanging it.
func waitUntil(t testing.TB, what string, interval time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func sameLimits(n int, l task.Limits) []task.Limits {
	out := make([]task.Limits, n)
	for i := range out {
		out[i] = l
	}
	return out
}

// Concurrent creates share transactions: 64 waiting creates are one group,
// and many concurrent ones without a hold commit in fewer transactions than
// creates.
func TestGroupCommitShares(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	var tasks []*task.Task
	for i := range 64 {
		tasks = append(tasks, tk([]string{"alice", "bob", "carol"}[i%3]))
	}
	before := pgstore.GroupCommits(s)
	for i, err := range createHeld(t, s, tasks, sameLimits(len(tasks), task.Limits{MaxActive: 1000, MaxFinished: 1000})) {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	if n := pgstore.GroupCommits(s) - before; n != 1 {
		t.Errorf("64 creates queued together committed in %d transactions, want 1", n)
	}
	for _, tk := range tasks {
		if _, err := s.Get(context.Background(), tk.Owner, tk.ID); err != nil {
			t.Errorf("Get %s after its group: %v", tk.ID, err)
		}
	}
}

// A group counts the creates of an owner accepted before each one: the
// bounds stay exact within a group, and a refused create refuses only
// itself.
func TestGroupQuotaExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		limits    task.Limits
		terminal  bool
		preexist  int // tasks of alice created before the group
		creates   int
		wantAdded int
	}{
		{name: "active bound", limits: task.Limits{MaxActive: 5}, creates: 20, wantAdded: 5},
		{name: "active bound with tasks before", limits: task.Limits{MaxActive: 5}, preexist: 3, creates: 20, wantAdded: 2},
		{name: "finished bound", limits: task.Limits{MaxActive: 100, MaxFinished: 4}, terminal: true, creates: 10, wantAdded: 4},
		{name: "finished bound with tasks before", limits: task.Limits{MaxFinished: 4}, terminal: true, preexist: 3, creates: 10, wantAdded: 1},
		{name: "under the bound", limits: task.Limits{MaxActive: 50, MaxFinished: 50}, creates: 20, wantAdded: 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, newSchema(t))
			ctx := context.Background()
			mk := func(owner string) *task.Task {
				x := tk(owner)
				if c.terminal {
					x.Status = task.StatusCompleted
				}
				return x
			}
			for range c.preexist {
				if err := s.Create(ctx, mk("alice")); err != nil {
					t.Fatal(err)
				}
			}
			var tasks []*task.Task
			for i := range c.creates {
				tasks = append(tasks, mk("alice"))
				if i%4 == 0 { // another owner's creates in the same group are not counted for alice
					tasks = append(tasks, mk("bob"))
				}
			}
			before := pgstore.GroupCommits(s)
			errs := createHeld(t, s, tasks, sameLimits(len(tasks), c.limits))
			added, bobAdded := 0, 0
			for i, err := range errs {
				var q *task.QuotaError
				switch {
				case err == nil && tasks[i].Owner == "alice":
					added++
				case err == nil:
					bobAdded++
				case errors.As(err, &q) && tasks[i].Owner == "alice" && q.Finished == c.terminal:
				default:
					t.Errorf("create %d of %s: %v", i, tasks[i].Owner, err)
				}
			}
			if added != c.wantAdded {
				t.Errorf("alice's creates accepted in one group: %d, want %d", added, c.wantAdded)
			}
			if want := (c.creates + 3) / 4; bobAdded != want { // within every bound
				t.Errorf("bob's creates accepted: %d of %d", bobAdded, want)
			}
			if n := pgstore.GroupCommits(s) - before; n != 1 {
				t.Errorf("the group committed in %d transactions, want 1", n)
			}
			if c.terminal {
				return
			}
			if n, err := s.CountActive(ctx, "alice"); err != nil || n != c.preexist+c.wantAdded {
				t.Errorf("CountActive(alice) = %d, %v; want %d", n, err, c.preexist+c.wantAdded)
			}
		})
	}
}

// A create that fails in a group fails alone: an id taken, an idempotency
// key known, a bound reached, and a row the database rejects (a NUL byte in
// text) each fail their own create, and the others of the group commit.
func TestGroupFailingRowIsolated(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	ctx := context.Background()
	existing := tk("alice")
	keyedFirst := tk("alice")
	keyedFirst.IdempotencyKey, keyedFirst.Fingerprint = "k1", "f1"
	for _, x := range []*task.Task{existing, keyedFirst} {
		if err := s.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	sameID := tk("alice")
	sameID.ID = existing.ID
	repeat := tk("alice")
	repeat.IdempotencyKey, repeat.Fingerprint = "k1", "f1"
	mismatch := tk("alice")
	mismatch.IdempotencyKey, mismatch.Fingerprint = "k1", "other"
	nul := tk("alice")
	nul.IdempotencyKey = "bad\x00key"
	dave1, dave2 := tk("dave"), tk("dave") // dave may have one active task
	good := []*task.Task{tk("alice"), tk("bob"), tk("carol")}

	tasks := []*task.Task{good[0], sameID, dave1, repeat, nul, good[1], mismatch, dave2, good[2]}
	limits := sameLimits(len(tasks), task.Limits{MaxActive: 100})
	limits[2], limits[7] = task.Limits{MaxActive: 1}, task.Limits{MaxActive: 1}
	errs := createHeld(t, s, tasks, limits)
	checks := []struct {
		name string
		i    int
		ok   func(error) bool
	}{
		{"a fresh create", 0, func(err error) bool { return err == nil }},
		{"an id taken", 1, func(err error) bool { return errors.Is(err, task.ErrExists) }},
		{"a repeat of a key", 3, func(err error) bool {
			var d *task.DuplicateError
			return errors.As(err, &d) && d.TaskID == keyedFirst.ID
		}},
		{"a row the database rejects", 4, func(err error) bool {
			return err != nil && !errors.Is(err, task.ErrUnavailable) && !errors.Is(err, task.ErrExists)
		}},
		{"a fresh create", 5, func(err error) bool { return err == nil }},
		{"a key with another fingerprint", 6, func(err error) bool { return errors.Is(err, task.ErrIdempotencyMismatch) }},
		{"a fresh create", 8, func(err error) bool { return err == nil }},
	}
	for _, c := range checks {
		if !c.ok(errs[c.i]) {
			t.Errorf("%s (create %d): %v", c.name, c.i, errs[c.i])
		}
	}
	// Of dave's two, the one the group took first is added, the other
	// refused at his bound.
	if (errs[2] == nil) == (errs[7] == nil) || !errors.Is(errors.Join(errs[2], errs[7]), task.ErrQuotaExceeded) {
		t.Errorf("dave's two creates with a bound of 1: %v, %v; want one added, one refused", errs[2], errs[7])
	}
	for _, x := range good {
		if _, err := s.Get(ctx, x.Owner, x.ID); err != nil {
			t.Errorf("Get %s of %s: %v", x.ID, x.Owner, err)
		}
	}
}

// A caller whose context ends while its create is still queued gets the
// context's error, and its create is not written.
func TestGroupCallerCancelled(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	held, release := pgstore.HoldGroups(s)
	first, gone := tk("alice"), tk("alice")
	firstErr := make(chan error, 1)
	go func() { firstErr <- s.Create(context.Background(), first) }()
	<-held
	ctx, cancel := context.WithCancel(context.Background())
	goneErr := make(chan error, 1)
	go func() { goneErr <- s.Create(ctx, gone) }()
	waitFor(t, func() bool { return pgstore.QueuedCreates(s) == 1 })
	cancel()
	if err := <-goneErr; !errors.Is(err, context.Canceled) {
		t.Errorf("create cancelled while queued: %v, want context.Canceled", err)
	}
	release()
	if err := <-firstErr; err != nil {
		t.Fatalf("create taken before the hold: %v", err)
	}
	// A create after it goes through the queue the cancelled one left.
	if err := s.Create(context.Background(), tk("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(context.Background(), "alice", gone.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("the cancelled create: Get = %v, want ErrNotFound", err)
	}
}

// Close with creates and updates in the committers' hands and queued
// answers every caller: written, or ErrClosed.
func TestGroupsClose(t *testing.T) {
	t.Parallel()
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: newSchema(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ended := tk("alice")
	if err := s.Create(ctx, ended); err != nil {
		t.Fatal(err)
	}
	heldCreates, releaseCreates := pgstore.HoldGroups(s)
	heldUpdates, releaseUpdates := pgstore.HoldUpdates(s)
	errs := make(chan error, 6)
	for i := range 3 {
		go func() { errs <- s.Create(ctx, tk("alice")) }()
		go func() {
			_, err := s.Update(ctx, "alice", ended.ID, func(t *task.Task) error {
				t.StatusMessage = "step"
				return nil
			})
			errs <- err
		}()
		if i == 0 {
			<-heldCreates
			<-heldUpdates
		}
	}
	waitFor(t, func() bool { return pgstore.QueuedCreates(s) == 2 && pgstore.QueuedUpdates(s) == 2 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	releaseCreates()
	releaseUpdates()
	for range 6 {
		if err := <-errs; err != nil && !errors.Is(err, task.ErrClosed) {
			t.Errorf("a write when the store closed: %v, want nil or ErrClosed", err)
		}
	}
	if err := <-closed; err != nil {
		t.Error(err)
	}
}
