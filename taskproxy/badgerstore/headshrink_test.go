package badgerstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A record that shrinks below headerMinRecord keeps a header of its
// earlier write: owner checks and summaries read the record instead, in
// the store and in a restore of its backup, never the stale header.
func TestShrunkRecordStaleHeader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(Options{Dir: filepath.Join(t.TempDir(), "store")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	tk := testTask("alice", time.Now())
	tk.Result = json.RawMessage(`{"text":"` + strings.Repeat("r", 2*headerMinRecord) + `"}`)
	if err := s.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "alice", tk.ID, func(x *task.Task) error {
		x.Result = nil
		return x.SetStatus(task.StatusInputRequired, "shrunk", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store, where string) {
		t.Helper()
		var stale bool
		_ = s.db.View(func(txn *badger.Txn) error {
			rec, err1 := txn.Get(recordKey(tk.ID))
			head, err2 := txn.Get(headerKey(tk.ID))
			stale = err1 == nil && err2 == nil && head.Version() != rec.Version()
			return nil
		})
		if !stale {
			t.Fatalf("%s: no stale header to test with", where)
		}
		if _, err := s.Get(ctx, "bob", tk.ID); !errors.Is(err, task.ErrForeign) {
			t.Errorf("%s: bob's Get: %v, want ErrForeign", where, err)
		}
		sum, err := s.GetSummary(ctx, "alice", tk.ID)
		if err != nil || sum.Status != task.StatusInputRequired || sum.StatusMessage != "shrunk" {
			t.Errorf("%s: GetSummary = %+v, %v", where, sum, err)
		}
		page, _, err := s.List(ctx, "alice", "", 10)
		if err != nil || len(page) != 1 || page[0].Status != task.StatusInputRequired {
			t.Errorf("%s: List = %+v, %v", where, page, err)
		}
		if page, _, err := s.List(ctx, "bob", "", 10); err != nil || len(page) != 0 {
			t.Errorf("%s: bob's List = %+v, %v", where, page, err)
		}
	}
	check(s, "store")
	var backup bytes.Buffer
	if err := s.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if err := Restore(dir, &backup, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	r, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	check(r, "restored")
}
