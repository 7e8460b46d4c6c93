package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// taskRows creates, reads and updates the rows of tasks (with their lease
// rows where a write changes them).
type taskRows struct {
	*database
	// maxRecord is the size limit of one encoded record.
	maxRecord int
	// groups and updates are the group committers of creates ([createGroups])
	// and of updates ([updateGroups]).
	groups  *createGroups
	updates *updateGroups
}

// encoded is a task as stored: its record, and its summary (Task.Summary),
// which listings and the owner check read instead.
type encoded struct{ record, summary []byte }

// encodeRecord encodes t for storing, within the size limit. The lease is
// left out: it has a row of its own.
func (s *taskRows) encodeRecord(t *task.Task) (encoded, error) {
	rec := *t
	rec.Lease = task.Lease{}
	data, err := task.EncodeRecord(&rec)
	if err != nil {
		return encoded{}, fmt.Errorf("pgstore: encoding task %s: %w", t.ID, err)
	}
	if len(data) > s.maxRecord {
		return encoded{}, &task.RecordTooLargeError{Size: len(data), Limit: s.maxRecord}
	}
	sum := rec.Summary()
	summary, err := task.EncodeRecord(sum)
	if err != nil {
		return encoded{}, fmt.Errorf("pgstore: encoding the summary of task %s: %w", t.ID, err)
	}
	return encoded{record: data, summary: summary}, nil
}

// decodeTask decodes a record and attaches the lease read beside it.
func decodeTask(record []byte, holder *string, expires *int64) (*task.Task, error) {
	var t task.Task
	if err := task.DecodeRecord(record, &t); err != nil {
		return nil, fmt.Errorf("decoding a task record: %w", err)
	}
	if holder != nil && expires != nil {
		t.Lease = task.Lease{Holder: *holder, Expires: time.Unix(0, *expires)}
	}
	return &t, nil
}

// Create stores a new task; see task.Store.
func (s *taskRows) Create(ctx context.Context, t *task.Task) error {
	return s.CreateWithin(ctx, t, 0)
}

// CreateWithin stores t unless its owner is at the quota; see
// task.Store.
func (s *taskRows) CreateWithin(ctx context.Context, t *task.Task, maxActive int) error {
	return s.CreateWithinLimits(ctx, t, task.Limits{MaxActive: maxActive})
}

// CreateWithinLimits stores t unless its quota (Task.Quota: its owner,
// or its QuotaKey) is at a bound. The create is written by the group
// committer ([createGroups]), in one transaction with the creates that wait
// beside it; the quota's row in the owners table is locked first, so
// that concurrent creates of one quota, on any replica, count one after
// the other.
func (s *taskRows) CreateWithinLimits(ctx context.Context, t *task.Task, l task.Limits) error {
	if s.closed.Load() {
		return task.ErrClosed
	}
	data, err := s.encodeRecord(t)
	if err != nil {
		return err
	}
	op := &createOp{t: t, owner: ownerHash(t.Owner), quota: ownerHash(t.Quota()), data: data, maxActive: l.MaxActive, maxFinished: l.MaxFinished, done: make(chan error, 1)}
	if t.Status.Terminal() {
		op.maxActive = 0
	}
	op.maxActive, op.maxFinished = max(op.maxActive, 0), max(op.maxFinished, 0)
	return s.groups.create(ctx, op)
}

// overLimits refuses a create at now when the quota (its hash) is at a
// bound (0: none); finished tasks count until their ttl ends.
func (s *taskRows) overLimits(ctx context.Context, tx pgx.Tx, quota []byte, now time.Time, maxActive, maxFinished int) (refused, err error) {
	var n int
	if maxActive > 0 {
		if err := tx.QueryRow(ctx, s.q.countActiveUpTo, quota, maxActive).Scan(&n); err != nil {
			return nil, err
		}
		if n >= maxActive {
			return &task.QuotaError{Limit: maxActive}, nil
		}
	}
	if maxFinished > 0 {
		if err := tx.QueryRow(ctx, s.q.countFinishedUpTo, quota, now.UnixNano(), maxFinished).Scan(&n); err != nil {
			return nil, err
		}
		if n >= maxFinished {
			return &task.QuotaError{Limit: maxFinished, Finished: true}, nil
		}
	}
	return nil, nil
}

// quotaHash is the quota_hash column of t: the hash of its QuotaKey, or
// NULL when it has none (it counts under its owner).
func quotaHash(t *task.Task) []byte {
	if t.QuotaKey == "" {
		return nil
	}
	return ownerHash(t.QuotaKey)
}

// insert writes the task and its lease in one statement, unless its id or
// its idempotency key is taken: then refused says why.
func (s *taskRows) insert(ctx context.Context, q querier, t *task.Task, owner []byte, data encoded) (refused, err error) {
	for range maxRetries {
		var n int
		err := q.QueryRow(ctx, s.q.insertTask, t.ID, owner, string(t.Status), t.CreatedAt.UnixNano(), t.ExpiresAt().UnixNano(),
			t.IdempotencyKey, t.Fingerprint, data.record, t.Lease.Holder, t.Lease.Expires.UnixNano(), data.summary, quotaHash(t)).Scan(&n)
		if err != nil || n == 1 {
			return nil, err
		}
		// Nothing inserted: the id exists, or the idempotency key belongs
		// to a task of this owner. If that task was swept meanwhile, the
		// insert is tried again.
		if refused, err = s.conflict(ctx, q, t, owner); refused != nil || err != nil {
			return refused, err
		}
	}
	return nil, fmt.Errorf("inserting task %s: kept conflicting with a task that vanished", t.ID)
}

// conflict explains an insert that inserted nothing: ErrExists, a
// *DuplicateError, ErrIdempotencyMismatch, or nil when the conflicting task
// is gone.
func (s *taskRows) conflict(ctx context.Context, tx querier, t *task.Task, owner []byte) (refused, err error) {
	var exists bool
	if err := tx.QueryRow(ctx, s.q.taskExists, t.ID).Scan(&exists); err != nil {
		return nil, err
	}
	if exists {
		return task.ErrExists, nil
	}
	if t.IdempotencyKey == "" {
		return nil, nil
	}
	var id, fingerprint string
	err = tx.QueryRow(ctx, s.q.byIdempotency, owner, t.IdempotencyKey).Scan(&id, &fingerprint)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	case fingerprint != t.Fingerprint:
		return task.ErrIdempotencyMismatch, nil
	}
	return &task.DuplicateError{TaskID: id}, nil
}

// row is a task as read for a write: its owner hash and version too.
type row struct {
	owner   []byte
	version int64
	tk      *task.Task
	size    int // of the encoded record
}

func scanRow(r pgx.Row) (*row, error) {
	var out row
	var record []byte
	var holder *string
	var expires *int64
	if err := r.Scan(&out.owner, &out.version, &record, &holder, &expires); err != nil {
		return nil, err
	}
	t, err := decodeTask(record, holder, expires)
	if err != nil {
		return nil, err
	}
	out.tk, out.size = t, len(record)
	return &out, nil
}

// Get returns the owner's task; see task.Store. The owner is in the
// query, so another owner's row is never fetched, whatever its size: only
// whether it exists is asked, for the audit log's ErrForeign.
func (s *taskRows) Get(ctx context.Context, owner, id string) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	if t := s.finished.get(owner, id, time.Now()); t != nil {
		return t, nil
	}
	return readAgain(ctx, s.database, func(q reader) (*task.Task, error) { return s.get(ctx, q, owner, id) })
}

// get is Get's read of the database, on q.
func (s *taskRows) get(ctx context.Context, q reader, owner, id string) (*task.Task, error) {
	r, err := scanRow(q.QueryRow(ctx, s.q.getOwn, id, ownerHash(owner)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, s.missing(ctx, q, owner, id)
	case err != nil:
		return nil, s.fail("reading task "+id, err)
	}
	s.finished.put(r.tk, r.size, time.Now())
	return r.tk, nil
}

// GetSummary returns the summary of the owner's task; see
// task.SummaryReader. It reads the row's summary column, not its record
// (but for a row written before summaries).
func (s *taskRows) GetSummary(ctx context.Context, owner, id string) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	if t := s.finished.get(owner, id, time.Now()); t != nil {
		return t.Summary(), nil
	}
	return readAgain(ctx, s.database, func(q reader) (*task.Task, error) { return s.getSummary(ctx, q, owner, id) })
}

// getSummary is GetSummary's read of the database, on q.
func (s *taskRows) getSummary(ctx context.Context, q reader, owner, id string) (*task.Task, error) {
	r, err := scanRow(q.QueryRow(ctx, s.q.getOwnSummary, id, ownerHash(owner)))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, s.missing(ctx, q, owner, id)
	case err != nil:
		return nil, s.fail("reading the summary of task "+id, err)
	}
	return r.tk.Summary(), nil
}

// missing says why the owner's read of id found no row: ErrForeign for
// another owner's task, else the answer of its tombstone (ErrExpired or
// ErrNotFound).
func (s *taskRows) missing(ctx context.Context, q reader, owner, id string) error {
	if err := s.notOwned(ctx, q, id); !errors.Is(err, task.ErrNotFound) || errors.Is(err, task.ErrForeign) {
		return err
	}
	return s.tombstone(ctx, q, owner, id)
}

// notOwned explains why the owner's query found no task id: ErrForeign
// when it exists (another owner's), ErrNotFound when it does not.
func (s *taskRows) notOwned(ctx context.Context, q reader, id string) error {
	var exists bool
	if err := q.QueryRow(ctx, s.q.taskExists, id).Scan(&exists); err != nil {
		return s.fail("reading task "+id, err)
	}
	if exists {
		return task.ErrForeign
	}
	return task.ErrNotFound
}

// tombstone gives ErrExpired when owner's task id was swept less than a ttl
// ago, ErrNotFound otherwise (for other owners too).
func (s *taskRows) tombstone(ctx context.Context, q reader, owner, id string) error {
	var stoneOwner []byte
	err := q.QueryRow(ctx, s.q.tombstone, id, time.Now().UnixNano()).Scan(&stoneOwner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return task.ErrNotFound
	case err != nil:
		return s.fail("reading the tombstone of task "+id, err)
	case bytes.Equal(stoneOwner, ownerHash(owner)):
		return task.ErrExpired
	}
	return task.ErrNotFound
}

// optimisticTries is how many times Update tries a plain compare-and-set
// before it locks the row for the read: under heavy contention on one task
// the lock makes every writer wait its turn instead of retrying in vain.
const optimisticTries = 3

// Update applies fn to the owner's task as a compare-and-set on the row's
// version; see task.Store. It is written by the group committer of updates
// ([updateGroups]), together with the updates waiting beside it.
func (s *taskRows) Update(ctx context.Context, owner, id string, fn func(*task.Task) error) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	return s.updates.update(&updateOp{owner: owner, ownerHash: ownerHash(owner), id: id, fn: fn, done: make(chan updateResult, 1)})
}

// updateAlone is Update in statements of its own: a few compare-and-sets,
// then the row locked for the read. The group committer hands it the
// updates it does not write itself.
func (s *taskRows) updateAlone(ctx context.Context, owner, id string, fn func(*task.Task) error) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	ctx, cancel := s.writeContext(ctx)
	defer cancel()
	for attempt := range 1000 {
		var out *task.Task
		var outcome error
		var done bool
		var outLen int // the record's size, for the cache of finished tasks
		write := func(q querier, cur *row) error {
			done, outcome, out = false, nil, nil
			if !bytes.Equal(cur.owner, ownerHash(owner)) {
				done, outcome = true, task.ErrForeign
				return nil
			}
			if cur.tk.Status.Terminal() {
				done, outcome = true, task.ErrTerminal
				return nil
			}
			next, refused := s.apply(cur.tk, fn)
			if refused != nil {
				done, outcome = true, refused
				return nil
			}
			data, err := s.encodeRecord(next)
			if err != nil {
				done, outcome = true, err
				return nil
			}
			ok, err := s.compareAndSet(ctx, q, cur, next, data)
			if err != nil || !ok {
				return err
			}
			if next.Status.Terminal() {
				next.Lease = task.Lease{}
			}
			done, out, outLen = true, next, len(data.record)
			return nil
		}
		var err error
		if attempt < optimisticTries {
			var cur *row
			cur, err = scanRow(s.pool.QueryRow(ctx, s.q.getOwn, id, ownerHash(owner)))
			if err == nil {
				err = write(s.pool, cur)
			}
		} else {
			err = s.inTx(ctx, func(tx pgx.Tx) error {
				cur, err := scanRow(tx.QueryRow(ctx, s.q.forUpdate, id, ownerHash(owner)))
				if err != nil {
					return err
				}
				return write(tx, cur)
			})
		}
		switch {
		case errors.Is(err, pgx.ErrNoRows): // the owner is in the query: another's row is never read
			return nil, s.notOwned(ctx, s.pool, id)
		case err != nil && !s.again(err):
			return nil, s.fail("updating task "+id, err)
		case done:
			if outcome == nil && out.Status.Terminal() {
				// Only now is the write known to have landed (the locked
				// path commits after write returns): a cached outcome that
				// was never committed would be served until its ttl.
				s.finished.put(out, outLen, time.Now())
			}
			return out, outcome
		}
	}
	return nil, s.fail("updating task "+id, errors.New("gave up after 1000 concurrent changes"))
}

// apply runs fn on a copy of cur and checks what it may change.
func (s *taskRows) apply(cur *task.Task, fn func(*task.Task) error) (*task.Task, error) {
	next := cur.Clone()
	if err := fn(next); err != nil {
		return nil, err
	}
	if next.ID != cur.ID || next.Owner != cur.Owner || next.QuotaKey != cur.QuotaKey || !next.CreatedAt.Equal(cur.CreatedAt) || next.TTL != cur.TTL {
		return nil, fmt.Errorf("task %s: an update may not change id, owner, quota key, createdAt or ttl", cur.ID)
	}
	if next.Status != cur.Status && !task.CanTransition(cur.Status, next.Status) {
		return nil, fmt.Errorf("%w: %s to %s", task.ErrBadTransition, cur.Status, next.Status)
	}
	return next, nil
}

// querier is the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// compareAndSet writes next over cur if the row is still at cur's version
// and not terminal; it reports false when it was not.
func (s *taskRows) compareAndSet(ctx context.Context, q querier, cur *row, next *task.Task, data encoded) (bool, error) {
	terminal := next.Status.Terminal()
	args := []any{next.ID, cur.version, string(next.Status), next.IdempotencyKey, next.Fingerprint, data.record}
	if terminal || next.Lease == cur.tk.Lease {
		var n int
		err := q.QueryRow(ctx, s.q.cas, append(args, terminal, data.summary)...).Scan(&n)
		return n == 1, err
	}
	// fn changed the lease itself: the record and the lease change
	// together, the lease only if it is still the one read.
	ok := false
	// In a transaction already (the locked path), this is a savepoint.
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q.casLease, append(args, data.summary)...)
		if err != nil || tag.RowsAffected() != 1 {
			return err
		}
		old, lease := cur.tk.Lease, next.Lease
		switch {
		case old.Holder == "":
			tag, err = tx.Exec(ctx, s.q.leaseInsert, next.ID, lease.Holder, lease.Expires.UnixNano())
		case lease.Holder == "":
			tag, err = tx.Exec(ctx, s.q.leaseDelete, next.ID, old.Holder, old.Expires.UnixNano())
		default:
			tag, err = tx.Exec(ctx, s.q.leaseUpdate, next.ID, old.Holder, old.Expires.UnixNano(), lease.Holder, lease.Expires.UnixNano())
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errLeaseMoved // roll back the record too
		}
		ok = true
		return nil
	})
	if errors.Is(err, errLeaseMoved) {
		return false, nil
	}
	return ok, err
}

var errLeaseMoved = errors.New("the lease changed meanwhile")
