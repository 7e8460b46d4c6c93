package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Leases on Badger. The directory lock means one process at a time has the
// store open; each open increments an epoch kept in the store, and lease
// holders are named "e<epoch>/p<pid>". A lease of an older epoch is
// therefore held by a process that has ended (crashed or stopped) and can be
// taken over at once; a lease of the current epoch only once it expires,
// which is what a store shared by several processes will rely on.

var epochKey = []byte("m/epoch")

// opening is this opening of the store: its epoch and the lease holder it
// names this process.
type opening struct {
	// epoch counts the opens of this store. Badger holds a directory lock,
	// so a lease held under an older epoch belongs to a process that is
	// gone and can be taken over at once.
	epoch  uint64
	holder string
}

// nextEpoch records in db that the store was opened once more.
func (s *opening) nextEpoch(db *badger.DB) error {
	err := db.Update(func(txn *badger.Txn) error {
		var epoch uint64
		item, err := txn.Get(epochKey)
		switch {
		case err == nil:
			if err := item.Value(func(v []byte) error {
				if len(v) != 8 {
					return errors.New("malformed epoch")
				}
				epoch = binary.BigEndian.Uint64(v)
				return nil
			}); err != nil {
				return err
			}
		case !errors.Is(err, badger.ErrKeyNotFound):
			return err
		}
		s.epoch = epoch + 1
		return txn.Set(epochKey, binary.BigEndian.AppendUint64(nil, s.epoch))
	})
	if err != nil {
		return fmt.Errorf("recording the store's epoch: %w", err)
	}
	s.holder = fmt.Sprintf("e%d/p%d", s.epoch, os.Getpid())
	return nil
}

// Holder names this process as a lease holder.
func (s *opening) Holder() string { return s.holder }

// holderGone reports whether holder belongs to an earlier opening of the
// store, whose process cannot still be running.
func (s *opening) holderGone(holder string) bool {
	epoch, _, ok := strings.Cut(strings.TrimPrefix(holder, "e"), "/")
	if !ok || !strings.HasPrefix(holder, "e") {
		return false
	}
	n, err := strconv.ParseUint(epoch, 10, 64)
	return err == nil && n < s.epoch
}

// leaseFree reports whether holder may take lease at now.
func (s *opening) leaseFree(lease task.Lease, holder string, now time.Time) bool {
	return lease.Holder == "" || lease.Holder == holder || !lease.Expires.After(now) || s.holderGone(lease.Holder)
}

// Acquire takes or renews the lease, as one compare-and-set. It writes the
// lease key only, a few bytes, whatever the size of the record; the first
// time, it also rewrites the record without the lease it was created with.
func (s *writer) Acquire(ctx context.Context, owner, id, holder string, now time.Time, ttl time.Duration) (*task.Task, error) {
	var out *task.Task
	err := s.write(func(txn *badger.Txn) (error, error) {
		out = nil
		t, leaseInRecord, outcome, fatal := s.liveRecord(txn, owner, id)
		if t == nil {
			return outcome, fatal
		}
		if !s.leaseFree(t.Lease, holder, now) {
			return task.ErrLeaseHeld, nil
		}
		t.Lease = task.Lease{Holder: holder, Expires: now.Add(ttl)}
		size := 0 // unknown unless rewritten: kept only if already cached
		if leaseInRecord {
			data, err := s.encodeRecord(t, false)
			if err != nil {
				return err, nil
			}
			header, err := headerFor(t, false, len(data))
			if err != nil {
				return nil, err
			}
			if err := putRecord(txn, t.ID, data, header); err != nil {
				return nil, err
			}
			size = len(data)
		}
		if err := setLease(txn, t.ID, t.Lease); err != nil {
			return nil, err
		}
		s.stage(t.ID, t, false, size)
		out = t
		return nil, nil
	})
	return out, err
}

// ListActive pages through the active index of every owner. The cursor is
// the position of the last key returned.
func (s *storeLister) ListActive(ctx context.Context, cursor string, limit int) ([]*task.Task, string, error) {
	var tasks []*task.Task
	next := ""
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			prefix := []byte("a/")
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			start := prefix
			if cursor != "" {
				start = append([]byte("a/"+cursor), 0)
			}
			for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
				key := it.Item().KeyCopy(nil)
				if len(tasks) == limit {
					return nil
				}
				next = string(key[len(prefix):])
				t, err := s.getTask(txn, string(key[bytes.LastIndexByte(key, '/')+1:]))
				if errors.Is(err, task.ErrNotFound) {
					continue
				}
				if err != nil {
					return err
				}
				tasks = append(tasks, t)
			}
			next = ""
			return nil
		})
	})
	return tasks, next, err
}
