package badgerstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// One write that Badger refuses fails alone: the good writes of its batch
// are durable, and the failure's text holds no record bytes.
func TestCommitBatchIsolatesBadWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newMemStore(t)
	secret := strings.Repeat("SECRET-ARGUMENT ", 1<<17) // 2 MiB, over Badger's in-memory value limit
	tests := []struct {
		name string
		bad  int // position of the bad write in a batch of 6
	}{{"first", 0}, {"middle", 3}, {"last", 5}}
	for _, tt := range tests {
		var batch []writeOp
		var good []*task.Task
		for i := range 6 {
			if i == tt.bad {
				id := task.NewTaskID()
				// Bypasses the store's own size guard, as a write Badger
				// refuses would: Badger's error hex-dumps the value.
				batch = append(batch, writeOp{apply: func(txn *badger.Txn) (error, error) {
					return nil, txn.Set(recordKey(id), []byte(secret))
				}})
				continue
			}
			tk := testTask("alice", time.Now())
			data, err := s.encodeRecord(tk, true)
			if err != nil {
				t.Fatal(err)
			}
			good = append(good, tk)
			batch = append(batch, writeOp{apply: func(txn *badger.Txn) (error, error) {
				if err := s.createIn(txn, tk, data, nil); err != nil {
					return nil, err
				}
				return nil, nil
			}})
		}
		results := s.commitBatch(batch)
		for i, err := range results {
			switch {
			case i == tt.bad && err == nil:
				t.Errorf("%s: the bad write succeeded", tt.name)
			case i == tt.bad && (strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "53 45 43") || strings.Contains(err.Error(), "\n")):
				t.Errorf("%s: the bad write's error dumps the record: %.200q", tt.name, err.Error())
			case i != tt.bad && err != nil:
				t.Errorf("%s: good write %d failed with the bad one: %.200s", tt.name, i, err)
			}
		}
		for _, tk := range good {
			if _, err := s.Get(ctx, "alice", tk.ID); err != nil {
				t.Errorf("%s: good task %s not durable: %v", tt.name, tk.ID, err)
			}
		}
	}
}

// The store's own size guard refuses an oversized record, on create and on
// update, with ErrRecordTooLarge and no content in the text; writes around
// it are unaffected.
func TestStoreRecordTooLarge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(Options{InMemory: true, MaxRecordBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	big := testTask("alice", time.Now())
	big.Params = []byte(`{"arguments":"` + strings.Repeat("SECRET", 20000) + `"}`)
	err = s.Create(ctx, big)
	var tooLarge *task.RecordTooLargeError
	if !errors.Is(err, task.ErrRecordTooLarge) || !errors.As(err, &tooLarge) || tooLarge.Limit != 64<<10 || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("oversized Create: err = %v, want a clean task.ErrRecordTooLarge with the limit", err)
	}
	small := testTask("alice", time.Now())
	if err := s.Create(ctx, small); err != nil {
		t.Fatal(err)
	}
	_, err = s.Update(ctx, "alice", small.ID, func(t *task.Task) error {
		t.Result = []byte(`"` + strings.Repeat("SECRET", 20000) + `"`)
		return nil
	})
	if !errors.Is(err, task.ErrRecordTooLarge) || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("oversized Update: err = %v, want task.ErrRecordTooLarge", err)
	}
	if got, err := s.Get(ctx, "alice", small.ID); err != nil || got.Result != nil {
		t.Errorf("after the refused update: %+v, %v; want the record unchanged", got, err)
	}
	if _, err := s.Get(ctx, "alice", big.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("the refused create was stored: %v", err)
	}
}
