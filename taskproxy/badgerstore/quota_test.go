package badgerstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Concurrent creates at a quota: exactly the quota succeeds, whatever
// batches the committer forms, and the rest are refused with QuotaError.
func TestStoreCreateWithinQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name           string
		limit, callers int
	}{
		{"cap 3 of 30", 3, 30},
		{"cap 1 of 50", 1, 50},
		{"cap 10 of 200", 10, 200},
	}
	for _, tt := range tests {
		s := newMemStore(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok, refused := 0, 0
		for range tt.callers {
			wg.Go(func() {
				err := s.CreateWithin(ctx, testTask("alice", time.Now()), tt.limit)
				var q *task.QuotaError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.As(err, &q) && errors.Is(err, task.ErrQuotaExceeded) && q.Limit == tt.limit:
					refused++
				default:
					t.Errorf("%s: unexpected error %v", tt.name, err)
				}
			})
		}
		wg.Wait()
		if ok != tt.limit || refused != tt.callers-tt.limit {
			t.Errorf("%s: %d created, %d refused; want %d and %d", tt.name, ok, refused, tt.limit, tt.callers-tt.limit)
		}
		if n, _ := s.CountActive(ctx, "alice"); n != tt.limit {
			t.Errorf("%s: %d active, want %d", tt.name, n, tt.limit)
		}
		// Another owner has a quota of its own.
		if err := s.CreateWithin(ctx, testTask("bob", time.Now()), tt.limit); err != nil {
			t.Errorf("%s: bob refused: %v", tt.name, err)
		}
	}
}

// Terminal tasks do not count, and a task ending frees room.
func TestStoreQuotaCountsActiveOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	a, b := testTask("alice", time.Now()), testTask("alice", time.Now())
	if err := s.CreateWithin(ctx, a, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWithin(ctx, b, 2); err != nil {
		t.Fatal(err)
	}
	ended := testTask("alice", time.Now())
	ended.Status = task.StatusCompleted
	if err := s.CreateWithin(ctx, ended, 2); err != nil {
		t.Errorf("a task created terminal was refused: %v", err)
	}
	if err := s.CreateWithin(ctx, testTask("alice", time.Now()), 2); !errors.Is(err, task.ErrQuotaExceeded) {
		t.Errorf("third active task: err = %v, want task.ErrQuotaExceeded", err)
	}
	if _, err := s.Update(ctx, "alice", a.ID, func(t *task.Task) error { t.Status = task.StatusCancelled; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateWithin(ctx, testTask("alice", time.Now()), 2); err != nil {
		t.Errorf("after a task ended: %v", err)
	}
}

// Within one committer batch, the count includes the creates made earlier
// in the same transaction.
func TestStoreQuotaWithinOneBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	var batch []writeOp
	for range 7 {
		apply, err := s.createOp(testTask("alice", time.Now()), task.Limits{MaxActive: 3})
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, writeOp{apply: apply})
	}
	results := s.commitBatch(batch)
	for i, err := range results {
		if want := i >= 3; errors.Is(err, task.ErrQuotaExceeded) != want || (!want && err != nil) {
			t.Errorf("write %d of the batch: err = %v", i, err)
		}
	}
	if n, _ := s.CountActive(ctx, "alice"); n != 3 {
		t.Errorf("%d active after one batch at quota 3", n)
	}
}
