package badgerstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The committer's cache of live records never outlives what the store
// holds: a swept task cannot be brought back by a late update, a batch that
// failed leaves nothing of itself, and a task that ended leaves the cache.
func TestLiveCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Now()
	message := func(s *Store, id string) (string, error) {
		var seen string
		_, err := s.Update(ctx, "alice", id, func(rec *task.Task) error { seen = rec.StatusMessage; return errNoChange })
		if errors.Is(err, errNoChange) {
			err = nil
		}
		return seen, err
	}
	tests := []struct {
		name string
		run  func(t *testing.T, s *Store, tk *task.Task)
	}{
		{"an update after the sweep finds no task", func(t *testing.T, s *Store, tk *task.Task) {
			if _, err := s.Sweep(ctx, t0.Add(2*time.Hour), 100); err != nil {
				t.Fatal(err)
			}
			_, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.StatusMessage = "late"; return nil })
			if !errors.Is(err, task.ErrNotFound) {
				t.Errorf("update of a swept task: %v, want ErrNotFound", err)
			}
			if _, err := s.Acquire(ctx, "alice", tk.ID, s.Holder(), t0, time.Minute); !errors.Is(err, task.ErrNotFound) {
				t.Errorf("lease of a swept task: %v, want ErrNotFound", err)
			}
			err = s.db.View(func(txn *badger.Txn) error { _, err := txn.Get(recordKey(tk.ID)); return err })
			if !errors.Is(err, badger.ErrKeyNotFound) {
				t.Errorf("the swept task's record is back: %v", err)
			}
		}},
		{"a failed batch leaves nothing in the cache", func(t *testing.T, s *Store, tk *task.Task) {
			phantom := tk.Clone()
			phantom.StatusMessage = "phantom"
			results := s.commitBatch([]writeOp{{apply: func(*badger.Txn) (error, error) {
				s.stage(tk.ID, phantom, true, 100)
				return nil, errors.New("the disk is gone")
			}}})
			if results[0] == nil {
				t.Fatal("the failing write succeeded")
			}
			if got, err := message(s, tk.ID); err != nil || got != "" {
				t.Errorf("after a failed batch the task reads %q, %v; want the stored \"\"", got, err)
			}
		}},
		{"updates and renewals read what the last write left", func(t *testing.T, s *Store, tk *task.Task) {
			if _, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.StatusMessage = "one"; return nil }); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Acquire(ctx, "alice", tk.ID, s.Holder(), t0.Add(time.Second), time.Minute); err != nil {
				t.Fatal(err)
			}
			got, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error { rec.StatusMessage += ", two"; return nil })
			if err != nil || got.StatusMessage != "one, two" || !got.Lease.Expires.Equal(t0.Add(time.Second+time.Minute)) {
				t.Fatalf("after an update and a renewal: %+v, %v", got, err)
			}
			if stored, err := s.Get(ctx, "alice", tk.ID); err != nil || stored.StatusMessage != "one, two" || !sameLease(stored.Lease, got.Lease) {
				t.Errorf("the store holds %+v, %v", stored, err)
			}
		}},
		{"a task that ended leaves the cache", func(t *testing.T, s *Store, tk *task.Task) {
			if _, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error {
				return rec.SetStatus(task.StatusCompleted, "", t0)
			}); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.live[tk.ID]; ok {
				t.Error("a completed task is still cached")
			}
			if _, err := message(s, tk.ID); !errors.Is(err, task.ErrTerminal) {
				t.Errorf("update of a completed task: %v, want ErrTerminal", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newMemStore(t)
			tk := testTask("alice", t0)
			tk.TTL = time.Minute
			tk.Lease = task.Lease{Holder: s.Holder(), Expires: t0.Add(30 * time.Second)}
			if err := s.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.live[tk.ID]; !ok {
				t.Fatal("a created task is not cached")
			}
			tt.run(t, s, tk)
		})
	}
}
