package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func newMemStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// errNoChange is an error of an update's function, which aborts it.
var errNoChange = errors.New("no change")

func testTask(owner string, created time.Time) *task.Task {
	return &task.Task{ID: task.NewTaskID(), Owner: owner, Status: task.StatusWorking, CreatedAt: created, UpdatedAt: created, TTL: time.Hour, Tool: "t"}
}

func TestStoreCreateGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	tk := testTask("alice", time.Now())
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, tk); !errors.Is(err, task.ErrExists) {
		t.Errorf("second Create: err = %v, want task.ErrExists", err)
	}
	got, err := s.Get(ctx, "alice", tk.ID)
	if err != nil || got.ID != tk.ID || got.Status != task.StatusWorking {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	tests := []struct{ name, owner, id string }{
		{"foreign owner", "bob", tk.ID},
		{"unknown id", "alice", task.NewTaskID()},
	}
	for _, tt := range tests {
		if _, err := s.Get(ctx, tt.owner, tt.id); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("%s: err = %v, want task.ErrNotFound", tt.name, err)
		}
		if _, err := s.Update(ctx, tt.owner, tt.id, func(*task.Task) error { return nil }); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("%s: Update err = %v, want task.ErrNotFound", tt.name, err)
		}
	}
}

func TestStoreUpdateRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	tk := testTask("alice", time.Now())
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name string
		fn   func(*task.Task) error
		want error
	}{
		{"to input_required", func(t *task.Task) error { t.Status = task.StatusInputRequired; return nil }, nil},
		{"fn error aborts", func(t *task.Task) error { t.Status = task.StatusFailed; return errNoChange }, errNoChange},
		{"owner is immutable", func(t *task.Task) error { t.Owner = "bob"; return nil }, nil /* checked below */},
		{"to completed", func(t *task.Task) error { t.Status = task.StatusCompleted; return nil }, nil},
		{"terminal never changes", func(t *task.Task) error { t.Status = task.StatusWorking; return nil }, task.ErrTerminal},
		{"terminal never changes, same status", func(t *task.Task) error { return nil }, task.ErrTerminal},
	}
	for _, st := range steps {
		_, err := s.Update(ctx, "alice", tk.ID, st.fn)
		if st.name == "owner is immutable" {
			if err == nil {
				t.Errorf("%s: update changing the owner succeeded", st.name)
			}
			continue
		}
		if !errors.Is(err, st.want) {
			t.Errorf("%s: err = %v, want %v", st.name, err, st.want)
		}
	}
	got, _ := s.Get(ctx, "alice", tk.ID)
	if got.Status != task.StatusCompleted {
		t.Errorf("final status %s, want completed", got.Status)
	}
	// A forbidden transition is refused even when fn forces it.
	other := testTask("alice", time.Now())
	other.Status = task.StatusCancelled
	if err := s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "alice", other.ID, func(t *task.Task) error { t.Status = task.StatusWorking; return nil }); !errors.Is(err, task.ErrTerminal) {
		t.Errorf("cancelled task changed: %v", err)
	}
}

// Concurrent compare-and-set: every increment lands exactly once, and of two
// racing terminal transitions exactly one wins.
func TestStoreUpdateConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	tk := testTask("alice", time.Now())
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.NextInputKey++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _ := s.Get(ctx, "alice", tk.ID)
	if got.NextInputKey != n {
		t.Fatalf("NextInputKey = %d, want %d (lost updates)", got.NextInputKey, n)
	}
	var wins, terminal int
	var mu sync.Mutex
	for _, to := range []task.Status{task.StatusCompleted, task.StatusCancelled, task.StatusFailed, task.StatusCancelled} {
		wg.Go(func() {
			_, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { return t.SetStatus(to, "", time.Now()) })
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, task.ErrTerminal):
				terminal++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 || terminal != 3 {
		t.Errorf("terminal race: %d wins, %d refused; want 1 and 3", wins, terminal)
	}
}

func TestStoreListAndCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	base := time.Now()
	var ids []string
	for i := range 7 {
		tk := testTask("alice", base.Add(time.Duration(i)*time.Millisecond))
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tk.ID)
	}
	if err := s.Create(ctx, testTask("bob", base)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "alice", ids[0], func(t *task.Task) error { t.Status = task.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}

	var got []string
	cursor, pages, firstCursor := "", 0, ""
	for {
		page, next, err := s.List(ctx, "alice", cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tk := range page {
			if tk.Owner != "alice" {
				t.Fatalf("listed a task of %s", tk.Owner)
			}
			got = append(got, tk.ID)
		}
		if next == "" {
			break
		}
		if firstCursor == "" {
			firstCursor = next
		}
		cursor = next
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) || pages != 3 {
		t.Errorf("listing = %v in %d pages, want %v in 3", got, pages, ids)
	}
	// A cursor the store did not issue to alice: forged (an unsigned
	// position, a position with a made-up MAC, a tampered position), or
	// issued to bob.
	if err := s.Create(ctx, testTask("bob", base.Add(time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	_, bobCursor, err := s.List(ctx, "bob", "", 1)
	if err != nil {
		t.Fatal(err)
	}
	pos, mac, _ := strings.Cut(firstCursor, ".")
	forged := []string{
		"!!", "AAAA", "MDAwMDAwMDAwMDAwMDAwMC8=", "MDAwMDAwMDAwMDAwMDAwMC8", pos,
		pos + ".AAAAAAAAAAAAAAAAAAAAAA", "MDAwMDAwMDAwMDAwMDAwMC8x." + mac, bobCursor,
	}
	if bobCursor == "" {
		t.Fatal("bob's first page of one gave no cursor")
	}
	for _, bad := range forged {
		if _, _, err := s.List(ctx, "alice", bad, 3); !errors.Is(err, task.ErrInvalidCursor) {
			t.Errorf("List(cursor %q) err = %v, want task.ErrInvalidCursor", bad, err)
		}
	}
	if n, err := s.CountActive(ctx, "alice"); err != nil || n != 6 {
		t.Errorf("CountActive(alice) = %d, %v; want 6", n, err)
	}
	if n, _ := s.CountActive(ctx, "bob"); n != 2 {
		t.Errorf("CountActive(bob) = %d, want 2", n)
	}
}

func TestStoreClosed(t *testing.T) {
	t.Parallel()
	s, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx, testTask("a", time.Now())); !errors.Is(err, task.ErrClosed) {
		t.Errorf("Create on closed store: %v", err)
	}
	if _, err := s.Get(ctx, "a", "x"); !errors.Is(err, task.ErrClosed) {
		t.Errorf("Get on closed store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStoreOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(Options{Dir: dir, SyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	tk := testTask("alice", time.Now())
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Error("a second open of a locked directory succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Get(ctx, "alice", tk.ID); err != nil {
		t.Errorf("task lost across reopen: %v", err)
	}
}

// A close that never ends (Badger retrying a memtable flush on a read-only
// filesystem) is given up after the limit, with why; one that ends in time
// reports its own error.
func TestCloseWithin(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	err := closeWithin(func() error { <-block; return nil }, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not done after") {
		t.Errorf("blocked close = %v, want a timeout naming the limit", err)
	}
	if err := closeWithin(func() error { return errors.New("boom") }, time.Minute); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("failed close = %v", err)
	}
	if err := closeWithin(func() error { return nil }, time.Minute); err != nil {
		t.Errorf("close = %v", err)
	}
}
