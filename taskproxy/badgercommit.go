package taskproxy

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Group commit. Every write of a task record (create, update, lease) goes
// to one committer goroutine, which takes whatever writes are waiting, up to
// maxBatch, and commits them in one Badger transaction: one commit (and,
// with SyncWrites, one fsync) covers them all. A write still returns only
// once it is durable, but concurrent writes share the cost. Each write in a
// batch keeps its own outcome: a refused one (duplicate idempotency key,
// terminal task, failed compare) writes nothing and refuses only itself. On
// a conflict with a transaction outside the committer the whole batch runs
// again on the new data, so every write is a compare-and-set.

// maxBatch bounds the writes of one transaction, well under Badger's
// transaction size limit for records of a few KiB.
const maxBatch = 128

// writeOp is one write: apply runs inside the batch transaction and returns
// the write's own outcome, or a fatal error that aborts the transaction (the
// batch is then split until only this write fails with it). apply may run
// more than once and must not block or call the store.
type writeOp struct {
	apply func(*badger.Txn) (outcome, fatal error)
	done  chan error
}

// write hands op to the committer and waits for its outcome.
func (s *BadgerStore) write(apply func(*badger.Txn) (error, error)) error {
	return s.use(func() error {
		done := make(chan error, 1)
		s.writes <- writeOp{apply: apply, done: done}
		return <-done // committed (or not) whatever the caller's context says since
	})
}

// commitWrites is the committer goroutine.
func (s *BadgerStore) commitWrites() {
	defer close(s.committerDone)
	// With SyncWrites every commit costs Badger two fsyncs (value log and
	// memtable log), whatever its size: before committing a small batch the
	// committer yields a few times, so that the requests already running
	// add their writes to it. Yielding waits for nothing when no other
	// goroutine is runnable, so an idle store commits at once.
	yields := 0
	if s.db.Opts().SyncWrites {
		yields = syncYields
	}
	for first := range s.writes {
		batch := s.drain([]writeOp{first})
		for range yields {
			if len(batch) >= maxBatch/2 {
				break
			}
			runtime.Gosched()
			batch = s.drain(batch)
		}
		results := s.commitBatch(batch)
		for i, op := range batch {
			op.done <- results[i]
		}
	}
}

// syncYields is how often the committer yields to gather writes for a
// small batch on a store with SyncWrites.
const syncYields = 3

// drain adds the writes waiting, up to maxBatch, to batch.
func (s *BadgerStore) drain(batch []writeOp) []writeOp {
	for len(batch) < maxBatch {
		select {
		case op, ok := <-s.writes:
			if !ok {
				return batch
			}
			batch = append(batch, op)
		default:
			return batch
		}
	}
	return batch
}

// commitBatch writes the batch in one transaction and returns each write's
// outcome. When the transaction fails (a write's fatal error, or a
// transaction too big for Badger), the batch is split in two and each half
// committed on its own, down to single writes: only the write at fault
// fails, and the others commit.
func (s *BadgerStore) commitBatch(batch []writeOp) []error {
	results := make([]error, len(batch))
	err := s.retryConflicts(context.Background(), "committing task writes", func(txn *badger.Txn) error {
		for i, op := range batch {
			outcome, fatal := op.apply(txn)
			if fatal != nil {
				return fatal
			}
			results[i] = outcome
		}
		return nil
	})
	if err == nil {
		return results
	}
	if len(batch) > 1 {
		half := len(batch) / 2
		return append(s.commitBatch(batch[:half]), s.commitBatch(batch[half:])...)
	}
	results[0] = cleanStoreError(err)
	return results
}

// cleanStoreError keeps the first line of an error: Badger's errors about
// oversized keys and values go on with a hex dump of the data, which holds
// another caller's arguments and must reach neither clients nor logs.
func cleanStoreError(err error) error {
	msg := err.Error()
	i := strings.IndexByte(msg, '\n')
	if i < 0 {
		return err
	}
	return &cleanError{msg: strings.TrimSuffix(strings.TrimSpace(msg[:i]), ":"), err: err}
}

// cleanError shows a shortened message but still unwraps to the original,
// so errors.Is keeps working.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

// Create stores t with its index keys; see Store.Create.
func (s *BadgerStore) Create(ctx context.Context, t *Task) error {
	return s.CreateWithin(ctx, t, 0)
}

// CreateWithin stores t unless its owner is at the quota; see
// Store.CreateWithin. The count runs inside the committer's transaction,
// whose iterators see the writes made earlier in the same batch, so a batch
// of concurrent creates is counted as it goes.
func (s *BadgerStore) CreateWithin(ctx context.Context, t *Task, maxActive int) error {
	apply, err := s.createOp(t, maxActive)
	if err != nil {
		return err
	}
	return s.write(apply)
}

// createOp returns the committer's write of a create.
func (s *BadgerStore) createOp(t *Task, maxActive int) (func(*badger.Txn) (error, error), error) {
	data, err := s.encodeRecord(t) // here, not on the committer's goroutine
	if err != nil {
		return nil, err
	}
	if t.Status.Terminal() {
		maxActive = 0
	}
	return func(txn *badger.Txn) (error, error) {
		// A repeat of a create (same idempotency key) finds its task even
		// at the quota: it adds none.
		if maxActive > 0 && t.IdempotencyKey != "" {
			if err := checkIdempotency(txn, t); err != nil {
				if refusal(err) {
					return err, nil
				}
				return nil, err
			}
		}
		if maxActive > 0 && countActive(txn, t.Owner, maxActive) >= maxActive {
			return &QuotaError{Limit: maxActive}, nil
		}
		err := createIn(txn, t, data)
		if err == nil || refusal(err) {
			return err, nil
		}
		return nil, err
	}, nil
}

// liveRecord reads the owner's task for a write: a missing, foreign or
// terminal task is the write's outcome; a read failure fails the batch.
func liveRecord(txn *badger.Txn, owner, id string) (t *Task, outcome, fatal error) {
	t, err := getRecord(txn, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, err, nil
	case err != nil:
		return nil, nil, err
	case t.Owner != owner:
		return nil, ErrForeign, nil
	case t.Status.Terminal():
		return nil, ErrTerminal, nil
	}
	return t, nil, nil
}

// refusal reports whether err refuses one create without failing the batch.
func refusal(err error) bool {
	var dup *DuplicateError
	return errors.Is(err, ErrExists) || errors.Is(err, ErrIdempotencyMismatch) || errors.As(err, &dup)
}

// Update applies fn to the owner's task as a compare-and-set; see
// Store.Update. A task becoming terminal leaves the active index and drops
// its lease key.
func (s *BadgerStore) Update(ctx context.Context, owner, id string, fn func(*Task) error) (*Task, error) {
	var out *Task
	err := s.write(func(txn *badger.Txn) (error, error) {
		out = nil
		cur, outcome, fatal := liveRecord(txn, owner, id)
		if cur == nil {
			return outcome, fatal
		}
		next := cur.Clone()
		if err := fn(next); err != nil {
			return err, nil
		}
		if next.ID != cur.ID || next.Owner != cur.Owner || !next.CreatedAt.Equal(cur.CreatedAt) || next.TTL != cur.TTL {
			return fmt.Errorf("task %s: an update may not change id, owner, createdAt or ttl", id), nil
		}
		if next.Status != cur.Status && !CanTransition(cur.Status, next.Status) {
			return fmt.Errorf("%w: %s to %s", ErrBadTransition, cur.Status, next.Status), nil
		}
		data, err := s.encodeRecord(next)
		if err != nil {
			return err, nil // too large: this write only
		}
		if next.Status.Terminal() {
			next.Lease = Lease{}
			if err := txn.Delete(activeKey(next)); err != nil {
				return nil, err
			}
		}
		if err := txn.Set(recordKey(next.ID), data); err != nil {
			return nil, err
		}
		if err := setLease(txn, next.ID, next.Lease); err != nil {
			return nil, err
		}
		out = next
		return nil, nil
	})
	return out, err
}

// createIn writes t and its index keys in txn, unless its id exists or its
// idempotency key belongs to a live task.
func createIn(txn *badger.Txn, t *Task, data []byte) error {
	if _, err := txn.Get(recordKey(t.ID)); err == nil {
		return ErrExists
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("checking task %s: %w", t.ID, err)
	}
	if t.IdempotencyKey != "" {
		if err := checkIdempotency(txn, t); err != nil {
			return err
		}
		if err := txn.Set(idempotencyKey(t), []byte(t.ID)); err != nil {
			return err
		}
	}
	if err := txn.Set(recordKey(t.ID), data); err != nil {
		return err
	}
	if t.Lease.Holder != "" {
		if err := setLease(txn, t.ID, t.Lease); err != nil {
			return err
		}
	}
	if err := txn.Set(ownerKey(t), nil); err != nil {
		return err
	}
	if err := txn.Set(expiryKey(t), nil); err != nil {
		return err
	}
	if !t.Status.Terminal() {
		return txn.Set(activeKey(t), nil)
	}
	return nil
}

func idempotencyKey(t *Task) []byte {
	return []byte("i/" + ownerHash(t.Owner) + "/" + t.IdempotencyKey)
}

// checkIdempotency refuses t when a live task of its owner has its key.
func checkIdempotency(txn *badger.Txn, t *Task) error {
	item, err := txn.Get(idempotencyKey(t))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading idempotency key: %w", err)
	}
	id, err := item.ValueCopy(nil)
	if err != nil {
		return fmt.Errorf("reading idempotency key: %w", err)
	}
	prev, err := getRecord(txn, string(id))
	if errors.Is(err, ErrNotFound) {
		return nil // swept: the key is free again
	}
	if err != nil {
		return err
	}
	if prev.Fingerprint != t.Fingerprint {
		return ErrIdempotencyMismatch
	}
	return &DuplicateError{TaskID: prev.ID}
}
