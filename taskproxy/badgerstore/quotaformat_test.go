package badgerstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A store of format 1, written before quota keys (its anonymous callers'
// tasks all under the one owner), opens as format 2 with its counts as
// they were: its tasks count under their owner, a task with a quota key
// beside them counts under its key, and an old task ending moves from its
// owner's active count to its finished one.
func TestFormat1TasksCountUnderTheirOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	now := time.Now().UTC()
	const anon = task.Anonymous
	working := []*task.Task{testTask(anon, now), testTask(anon, now)}
	done := testTask(anon, now)
	done.Status = task.StatusCompleted

	// The layout of format 1, written by hand: the active and finished
	// indexes under the owner's hash.
	s, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(anon))
	owner := hex.EncodeToString(sum[:16])
	err = s.db.Update(func(txn *badger.Txn) error {
		for _, tk := range append(working, done) {
			data, err := task.EncodeRecord(tk)
			if err != nil {
				return err
			}
			index := fmt.Appendf(nil, "a/%s/%s", owner, tk.ID)
			if tk.Status.Terminal() {
				index = fmt.Appendf(nil, "f/%s/%016x/%s", owner, tk.ExpiresAt().UnixNano(), tk.ID)
			}
			for k, v := range map[string][]byte{
				string(recordKey(tk.ID)): data, string(ownerKey(tk)): nil, string(expiryKey(tk)): nil, string(index): nil,
			} {
				if err := txn.Set([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return txn.Set(formatKey, binary.BigEndian.AppendUint64(nil, 1))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := s.FormatVersion(); err != nil || v != FormatVersion {
		t.Fatalf("format version after the open = %d, %v; want %d", v, err, FormatVersion)
	}
	if n, err := s.CountActive(ctx, anon); err != nil || n != 2 {
		t.Fatalf("CountActive(%s) = %d, %v; want the 2 written before quota keys", anon, n, err)
	}
	limits := task.Limits{MaxActive: 2, MaxFinished: 1}
	keyed := func(quota string, status task.Status) *task.Task {
		tk := testTask(anon, now)
		tk.QuotaKey, tk.Status = quota, status
		return tk
	}
	var q *task.QuotaError
	steps := []struct {
		name  string
		tk    *task.Task
		check func(error) bool
	}{
		{"the owner at its active bound", keyed("", task.StatusWorking), func(err error) bool { return errors.As(err, &q) && !q.Finished }},
		{"the owner at its finished bound", keyed("", task.StatusFailed), func(err error) bool { return errors.As(err, &q) && q.Finished }},
		{"a quota key beside them", keyed("ip:192.0.2.1", task.StatusWorking), func(err error) bool { return err == nil }},
		{"a quota key's finished task", keyed("ip:192.0.2.1", task.StatusFailed), func(err error) bool { return err == nil }},
	}
	for _, st := range steps {
		if err := s.CreateWithinLimits(ctx, st.tk, limits); !st.check(err) {
			t.Errorf("%s: err = %v", st.name, err)
		}
	}
	if _, err := s.Update(ctx, anon, working[0].ID, func(r *task.Task) error { return r.SetStatus(task.StatusCancelled, "", now) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		quota string
		want  int
	}{{anon, 1}, {"ip:192.0.2.1", 1}} {
		if n, err := s.CountActive(ctx, c.quota); err != nil || n != c.want {
			t.Errorf("after an old task ended: CountActive(%s) = %d, %v; want %d", c.quota, n, err, c.want)
		}
	}
	var finished int
	err = s.db.View(func(txn *badger.Txn) error {
		finished, err = countFinished(txn, anon, now, 10)
		return err
	})
	if err != nil || finished != 2 {
		t.Errorf("the owner's finished tasks = %d, %v; want the old one and the one ended now", finished, err)
	}
}
