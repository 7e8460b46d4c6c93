package badgerstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// bigEndedTask is a completed task of owner with a result of size bytes.
func bigEndedTask(owner string, size int) *task.Task {
	tk := testTask(owner, time.Now())
	tk.Status = task.StatusCompleted
	tk.Result = json.RawMessage(`{"text":"` + strings.Repeat("r", size) + `"}`)
	return tk
}

// corruptRecord replaces task id's record with bytes no decoder takes,
// keeping its header (if any) the record's: what reads the record fails.
func corruptRecord(t *testing.T, s *Store, id string) {
	t.Helper()
	err := s.db.Update(func(txn *badger.Txn) error {
		if item, err := txn.Get(headerKey(id)); err == nil {
			head, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			if err := txn.Set(headerKey(id), head); err != nil {
				return err
			}
		}
		return txn.Set(recordKey(id), []byte("not a record"))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The owner check and the listings read a task's header, never its record:
// with the record unreadable, another owner's lookup is still refused as
// "not found" (not failed on the record), and the listings still answer.
func TestHeaderSparesTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	tk := bigEndedTask("alice", 256<<10)
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	corruptRecord(t, s, tk.ID)
	var reads atomic.Int64
	hook := func(id string) {
		if id == tk.ID {
			reads.Add(1)
		}
	}
	s.onRecordRead = hook
	cases := []struct {
		name  string
		call  func() error
		reads int64
	}{
		{"another owner's Get", func() error {
			if _, err := s.Get(ctx, "bob", tk.ID); !errors.Is(err, task.ErrForeign) {
				return errors.New("want ErrForeign, got " + errString(err))
			}
			return nil
		}, 0},
		{"another owner's Update", func() error {
			_, err := s.Update(ctx, "bob", tk.ID, func(*task.Task) error { return nil })
			if !errors.Is(err, task.ErrForeign) {
				return errors.New("want ErrForeign, got " + errString(err))
			}
			return nil
		}, 0},
		{"List", func() error {
			page, _, err := s.List(ctx, "alice", "", 10)
			if err != nil || len(page) != 1 || page[0].ID != tk.ID || page[0].Status != task.StatusCompleted {
				return errors.New("want the task's summary, got error " + errString(err))
			}
			return nil
		}, 0},
		{"ListAll", func() error {
			page, _, err := s.ListAll(ctx, task.TaskFilter{Status: task.StatusCompleted}, "", 10)
			if err != nil || len(page) != 1 || page[0].ID != tk.ID {
				return errors.New("want the task's summary, got error " + errString(err))
			}
			return nil
		}, 0},
		{"the owner's Get reads the record", func() error {
			if _, err := s.Get(ctx, "alice", tk.ID); err == nil || errors.Is(err, task.ErrNotFound) {
				return errors.New("want the record's decoding error, got " + errString(err))
			}
			return nil
		}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reads.Store(0)
			if err := c.call(); err != nil {
				t.Error(err)
			}
			if n := reads.Load(); n != c.reads {
				t.Errorf("read the record %d times, want %d", n, c.reads)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

// Records of the builds before headers still answer: without a header
// the record is read whole; and a header that an older build's rewrite of
// the record left behind (of another version) is not believed.
func TestRecordsWithoutTheirHeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	old := bigEndedTask("alice", 64<<10)
	data, err := s.encodeRecord(old, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return s.createIn(txn, old, data, nil) }); err != nil {
		t.Fatal(err)
	}
	rewritten := testTask("alice", time.Now().Add(time.Millisecond))
	if err := s.Create(ctx, rewritten); err != nil {
		t.Fatal(err)
	}
	ended := *rewritten
	ended.Lease, ended.Status, ended.StatusMessage = task.Lease{}, task.StatusFailed, "by an older build"
	data, err = s.encodeRecord(&ended, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(recordKey(ended.ID), data) }); err != nil {
		t.Fatal(err)
	}

	if got, err := s.Get(ctx, "alice", old.ID); err != nil || len(got.Result) != len(old.Result) {
		t.Errorf("Get of a record without header: %v", err)
	}
	if _, err := s.Get(ctx, "bob", old.ID); !errors.Is(err, task.ErrForeign) {
		t.Errorf("another owner's Get of a record without header: %v, want ErrForeign", err)
	}
	page, _, err := s.List(ctx, "alice", "", 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("List = %d tasks, %v; want 2", len(page), err)
	}
	if page[0].ID != old.ID || len(page[0].Result) != 0 || page[0].Status != task.StatusCompleted {
		t.Errorf("List shows the old record as %+v, want its summary", page[0])
	}
	if page[1].Status != task.StatusFailed || page[1].StatusMessage != ended.StatusMessage {
		t.Errorf("List shows the rewritten record as %s %q, want the record's failed, not its stale header", page[1].Status, page[1].StatusMessage)
	}
}

// The owner check on a header's bytes agrees with decoding it, for owners
// that need escaping too, and gives up on a header of another shape.
func TestHeaderOwnedBy(t *testing.T) {
	t.Parallel()
	owners := []string{"alice", "alic", "alice2", `a"b\c`, "<é>\u2028", "tenant/alice"}
	for _, stored := range owners {
		tk := testTask(stored, time.Now())
		header, err := encodeHeader(tk, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, asked := range owners {
			mine, known := headerOwnedBy(header, tk.ID, asked)
			if !known || mine != (asked == stored) {
				t.Errorf("header of %q asked for %q: mine %v known %v", stored, asked, mine, known)
			}
		}
		if _, known := headerOwnedBy(header, task.NewTaskID(), stored); known {
			t.Errorf("header of task %s taken for another id", tk.ID)
		}
	}
	if _, known := headerOwnedBy([]byte(`{"owner":"alice","id":"x"}`), "x", "alice"); known {
		t.Error("a header of another shape was read")
	}
}

// Only a record of headerMinRecord bytes or more gets a header; a task
// without one reads as one with, and a task whose record grows past the
// bound gets one with the write that grew it.
func TestHeaderOnlyForLargeRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	small := testTask("alice", time.Now())
	large := bigEndedTask("alice", headerMinRecord)
	for _, tk := range []*task.Task{small, large} {
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	headed := func(id string) bool {
		t.Helper()
		var ok bool
		err := s.db.View(func(txn *badger.Txn) error {
			rec, err := txn.Get(recordKey(id))
			if err != nil {
				return err
			}
			head, err := txn.Get(headerKey(id))
			ok = err == nil && head.Version() == rec.Version()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if headed(small.ID) {
		t.Errorf("a record under %d bytes got a header", headerMinRecord)
	}
	if !headed(large.ID) {
		t.Errorf("a record of %d bytes or more got no header", headerMinRecord)
	}
	for _, tk := range []*task.Task{small, large} {
		got, err := s.Get(ctx, "alice", tk.ID)
		if err != nil || got.ID != tk.ID || len(got.Result) != len(tk.Result) {
			t.Errorf("Get of %s: %v", tk.ID, err)
		}
		if _, err := s.Get(ctx, "bob", tk.ID); !errors.Is(err, task.ErrForeign) {
			t.Errorf("another owner's Get of %s: %v, want ErrForeign", tk.ID, err)
		}
		sum, err := s.GetSummary(ctx, "alice", tk.ID)
		if err != nil || sum.Status != tk.Status || len(sum.Result) != 0 {
			t.Errorf("GetSummary of %s = %+v, %v; want the summary", tk.ID, sum, err)
		}
	}
	ended, err := s.Update(ctx, "alice", small.ID, func(tk *task.Task) error {
		tk.Status = task.StatusCompleted
		tk.Result = json.RawMessage(`{"text":"` + strings.Repeat("r", headerMinRecord) + `"}`)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !headed(small.ID) {
		t.Error("a record that grew past the bound got no header")
	}
	page, _, err := s.List(ctx, "alice", "", 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("List = %d tasks, %v; want 2", len(page), err)
	}
	for _, p := range page {
		if p.Status != task.StatusCompleted || len(p.Result) != 0 {
			t.Errorf("List shows %s as %s with %d bytes of result, want its completed summary", p.ID, p.Status, len(p.Result))
		}
	}
	if ended.Status != task.StatusCompleted {
		t.Errorf("Update returned %s", ended.Status)
	}
}
