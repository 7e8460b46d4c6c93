package badgerstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
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

// committer is the group commit: the one goroutine that commits every
// write of a task record or lease, and its cache of the live records it
// wrote ([committer.readLive]).
type committer struct {
	*handle
	*opening
	// writes feeds the committer goroutine; committerDone closes when it
	// has returned, after Close closed writes.
	writes        chan writeOp
	committerDone chan struct{}
	// live and staged are the committer's cache of live records
	// ([committer.readLive]); only the committer goroutine touches them.
	live, staged map[string]*liveEntry
	// finished holds the ceilings of owners' finished counts
	// ([finishedCeilings]); only the committer goroutine touches it.
	finished finishedCeilings
}

// writer makes the writes of tasks (creates, updates, and leases in
// [opening]) and hands them to the committer.
type writer struct {
	*committer
	// maxRecord is the size limit of one encoded record.
	maxRecord int
}

// write hands op to the committer and waits for its outcome.
func (s *committer) write(apply func(*badger.Txn) (error, error)) error {
	return s.use(func() error {
		done := make(chan error, 1)
		s.writes <- writeOp{apply: apply, done: done}
		return <-done // committed (or not) whatever the caller's context says since
	})
}

// commitWrites is the committer goroutine.
func (s *committer) commitWrites() {
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
func (s *committer) drain(batch []writeOp) []writeOp {
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
func (s *committer) commitBatch(batch []writeOp) []error {
	results := make([]error, len(batch))
	err := s.retryConflicts(context.Background(), "committing task writes", func(txn *badger.Txn) error {
		clear(s.staged) // a run again after a conflict starts afresh
		for i, op := range batch {
			outcome, fatal := op.apply(txn)
			if fatal != nil {
				return fatal
			}
			results[i] = outcome
		}
		return nil
	})
	s.settle(err == nil)
	if err == nil {
		return results
	}
	if len(batch) > 1 {
		half := len(batch) / 2
		return append(s.commitBatch(batch[:half]), s.commitBatch(batch[half:])...)
	}
	results[0] = task.CleanStoreError(err)
	return results
}

// Create stores t with its index keys; see task.Store.Create.
func (s *writer) Create(ctx context.Context, t *task.Task) error {
	return s.CreateWithin(ctx, t, 0)
}

// CreateWithin stores t unless its owner is at the quota; see
// task.Store.CreateWithin.
func (s *writer) CreateWithin(ctx context.Context, t *task.Task, maxActive int) error {
	return s.CreateWithinLimits(ctx, t, task.Limits{MaxActive: maxActive})
}

// CreateWithinLimits stores t unless its quota (Task.Quota) is at a bound; see
// task.Store.CreateWithinLimits. The counts run inside the
// committer's transaction, whose iterators see the writes made earlier in
// the same batch, so a batch of concurrent creates is counted as it goes.
func (s *writer) CreateWithinLimits(ctx context.Context, t *task.Task, l task.Limits) error {
	apply, err := s.createOp(t, l)
	if err != nil {
		return err
	}
	return s.write(apply)
}

// createOp returns the committer's write of a create.
func (s *writer) createOp(t *task.Task, l task.Limits) (func(*badger.Txn) (error, error), error) {
	withLease := !t.Status.Terminal()
	data, err := s.encodeRecord(t, withLease) // here, not on the committer's goroutine
	if err != nil {
		return nil, err
	}
	header, err := headerFor(t, withLease, len(data))
	if err != nil {
		return nil, err
	}
	maxActive, maxFinished := l.MaxActive, l.MaxFinished
	if t.Status.Terminal() {
		maxActive = 0
	}
	return func(txn *badger.Txn) (error, error) {
		// A repeat of a create (same idempotency key) finds its task even
		// at a bound: it adds none.
		if (maxActive > 0 || maxFinished > 0) && t.IdempotencyKey != "" {
			if err := s.checkIdempotency(txn, t); err != nil {
				if refusal(err) {
					return err, nil
				}
				return nil, err
			}
		}
		if maxActive > 0 && countActive(txn, t.Quota(), maxActive) >= maxActive {
			return &task.QuotaError{Limit: maxActive}, nil
		}
		if maxFinished > 0 && s.finished.needsWalk(t.Quota(), maxFinished) {
			n, err := s.finished.walk(txn, t.Quota(), t.CreatedAt, maxFinished)
			if err != nil {
				return nil, err
			}
			if n >= maxFinished {
				return &task.QuotaError{Limit: maxFinished, Finished: true}, nil
			}
		}
		err := s.createIn(txn, t, data, header)
		if err == nil {
			s.stage(t.ID, t, true, len(data))
			if t.Status.Terminal() {
				s.finished.added(t.Quota())
			}
		}
		if err == nil || refusal(err) {
			return err, nil
		}
		return nil, err
	}, nil
}

// liveRecord reads the owner's task for a write (from the committer's
// cache when it holds the task): a missing, foreign or terminal task is the
// write's outcome; a read failure fails the batch.
// leaseInRecord reports where the task's lease lives (see encodeRecord).
//
// Another owner's task is refused on its header ([handle.readHead]) before its
// record is read, whatever its size.
func (s *committer) liveRecord(txn *badger.Txn, owner, id string) (t *task.Task, leaseInRecord bool, outcome, fatal error) {
	if !s.cached(id) {
		switch _, _, err := s.checkOwner(txn, id, owner); {
		case errors.Is(err, task.ErrNotFound): // ErrForeign too
			return nil, false, err, nil
		case err != nil:
			return nil, false, nil, err
		}
	}
	t, leaseInRecord, err := s.readLive(txn, id)
	switch {
	case errors.Is(err, task.ErrNotFound):
		return nil, false, err, nil
	case err != nil:
		return nil, false, nil, err
	case t.Owner != owner:
		return nil, false, task.ErrForeign, nil
	case t.Status.Terminal():
		return nil, false, task.ErrTerminal, nil
	}
	return t, leaseInRecord, nil, nil
}

// refusal reports whether err refuses one create without failing the batch.
func refusal(err error) bool {
	var dup *task.DuplicateError
	return errors.Is(err, task.ErrExists) || errors.Is(err, task.ErrIdempotencyMismatch) || errors.As(err, &dup)
}

// Update applies fn to the owner's task as a compare-and-set; see
// task.Store.Update. A task becoming terminal leaves the active index
// and drops its lease key.
func (s *writer) Update(ctx context.Context, owner, id string, fn func(*task.Task) error) (*task.Task, error) {
	var out *task.Task
	err := s.write(func(txn *badger.Txn) (error, error) {
		out = nil
		cur, leaseInRecord, outcome, fatal := s.liveRecord(txn, owner, id)
		if cur == nil {
			return outcome, fatal
		}
		next := cur.Clone()
		if err := fn(next); err != nil {
			return err, nil
		}
		if next.ID != cur.ID || next.Owner != cur.Owner || next.QuotaKey != cur.QuotaKey || !next.CreatedAt.Equal(cur.CreatedAt) || next.TTL != cur.TTL {
			return fmt.Errorf("task %s: an update may not change id, owner, quota key, createdAt or ttl", id), nil
		}
		if next.Status != cur.Status && !task.CanTransition(cur.Status, next.Status) {
			return fmt.Errorf("%w: %s to %s", task.ErrBadTransition, cur.Status, next.Status), nil
		}
		if next.Status.Terminal() {
			next.Lease = task.Lease{}
		}
		// The lease stays where it was: in the record, or under its key.
		data, err := s.encodeRecord(next, leaseInRecord)
		if err != nil {
			return err, nil // too large: this write only
		}
		header, err := headerFor(next, leaseInRecord, len(data))
		if err != nil {
			return nil, err
		}
		if next.Status.Terminal() {
			if err := txn.Delete(activeKey(next)); err != nil {
				return nil, err
			}
			if err := txn.Set(finishedKey(next), nil); err != nil {
				return nil, err
			}
			s.finished.added(next.Quota())
		}
		if err := putRecord(txn, next.ID, data, header); err != nil {
			return nil, err
		}
		if !leaseInRecord && !sameLease(next.Lease, cur.Lease) {
			if err := setLease(txn, next.ID, next.Lease); err != nil {
				return nil, err
			}
		}
		s.stage(next.ID, next, leaseInRecord, len(data))
		out = next
		return nil, nil
	})
	return out, err
}

// sameLease reports whether a and b are the same lease.
func sameLease(a, b task.Lease) bool {
	return a.Holder == b.Holder && a.Expires.Equal(b.Expires)
}

// createIn writes t (data, its lease included; and its header) and its
// index keys in txn, unless its id exists or its idempotency key belongs to
// a live task.
func (s *handle) createIn(txn *badger.Txn, t *task.Task, data, header []byte) error {
	if _, err := txn.Get(recordKey(t.ID)); err == nil {
		return task.ErrExists
	} else if !errors.Is(err, badger.ErrKeyNotFound) {
		return fmt.Errorf("checking task %s: %w", t.ID, err)
	}
	if t.IdempotencyKey != "" {
		if err := s.checkIdempotency(txn, t); err != nil {
			return err
		}
		if err := txn.Set(idempotencyKey(t), []byte(t.ID)); err != nil {
			return err
		}
	}
	if err := putRecord(txn, t.ID, data, header); err != nil { // with its lease
		return err
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
	return txn.Set(finishedKey(t), nil)
}

func idempotencyKey(t *task.Task) []byte {
	return []byte("i/" + ownerHash(t.Owner) + "/" + t.IdempotencyKey)
}

// checkIdempotency refuses t when a live task of its owner has its key.
func (s *handle) checkIdempotency(txn *badger.Txn, t *task.Task) error {
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
	prev, err := s.getRecord(txn, string(id))
	if errors.Is(err, task.ErrNotFound) {
		return nil // swept: the key is free again
	}
	if err != nil {
		return err
	}
	if prev.Fingerprint != t.Fingerprint {
		return task.ErrIdempotencyMismatch
	}
	return &task.DuplicateError{TaskID: prev.ID}
}
