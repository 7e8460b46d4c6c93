package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Group commit of creates. Every create is queued to one committer
// goroutine, which takes whatever creates are waiting (up to maxGroup) and
// writes them in one transaction: one commit, one WAL flush, and for the
// creates of one owner one lock of the owner's row and one count of its
// tasks, where each create alone took them all. The "owner" of the bounds
// (its row, its counts, its ceiling) is the create's quota (Task.Quota):
// its owner, or an anonymous caller's client address; the idempotency
// keys stay the owner's. A create still returns only
// once its row committed.
//
// A group's transaction, in order:
//
//  1. BEGIN, SET LOCAL lock_timeout (groupLockTimeout), then the rows of the
//     group's owners are locked (the quota lock of a single create), in the
//     order of their hashes, and their ceilings read ([ownerBounds]); the ids
//     and idempotency keys of the group are looked up;
//  2. each owner's tasks are counted, once for the group, where a bound
//     needs it: active ones up to the active bound, finished ones only when
//     the owner's ceiling does not show the group to stay under that bound;
//  3. each create is decided in arrival order: an id that exists, a known
//     idempotency key, or a bound reached refuses that create alone; the
//     counts include the creates of the same owner accepted before it in
//     the group, so a bound stays exact;
//  4. the accepted rows are inserted in one statement, in the order of
//     (owner, idempotency key, id), the owners' ceilings written, and
//     COMMIT; a row that a concurrent transaction took meanwhile inserts
//     nothing, which fails the insert, so the COMMIT does not run and the
//     group runs again without it (its refusal now found in step 1).
//
// Steps 1 and 4 are one round trip each (a pipeline of statements); step 2
// is one more when it counts.
//
// Every create locks its owner's row, with a bound or not, so the creates
// of one owner are written one group after another on every replica; two
// groups never hold keys of one owner at once, and so never wait for each
// other's keys. The one exception is an owner whose tasks have quota keys
// (anonymous callers, one row per client address): two groups may then
// insert keys of that owner at once. Both insert in the same order, so
// the later waits for the earlier and never the reverse, and a key the
// earlier took is the race above: the later group runs again and finds it.
//
// A serialization failure or deadlock runs the group again. A lock wait
// longer than groupLockTimeout (an owner's row held by a long transaction
// elsewhere) does not hold up the others: the group is split by owner,
// and an owner's creates that still wait are handed to a goroutine of
// their own that writes them one by one as before, waiting up to the write
// deadline; only a create that still waits then fails (unavailable). A
// failure of reaching the database fails the whole group; any other
// failure is narrowed by halving the group down to the create at fault.
//
// A caller whose context ends while its create is still queued gets the
// context's error and its create is dropped; once the committer took it,
// the caller waits for the group's outcome.

// maxGroup bounds the creates of one transaction.
const maxGroup = 64

// createOp is one create waiting for the committer.
type createOp struct {
	t *task.Task
	// owner is the hash of t's owner, quota that of its quota (Task.Quota),
	// which the bounds count.
	owner, quota           []byte
	data                   encoded
	maxActive, maxFinished int
	// state is opQueued until the committer takes the op (opTaken) or its
	// caller gives up on it (opAbandoned), whichever comes first.
	state atomic.Int32
	done  chan error // buffered: the committer never waits on a caller
}

const (
	opQueued int32 = iota
	opTaken
	opAbandoned
)

// createGroups is the group committer of creates.
type createGroups struct {
	*taskRows
	queue   chan *createOp
	stop    chan struct{} // closed by Close: the committer returns
	stopped chan struct{} // closed when the committer has returned
	// slow is the creates handed to their own goroutines (a lock wait).
	slow sync.WaitGroup
	// groups counts the group transactions committed, walks the counts of
	// owners' finished tasks they made ([ownerBounds]), for tests.
	groups, walks atomic.Uint64
	// beforeGroup, when set (by tests), runs in the committer once it has
	// the first create of a group and before it takes the others.
	beforeGroup atomic.Pointer[func()]
}

func newCreateGroups(rows *taskRows) *createGroups {
	g := &createGroups{taskRows: rows, queue: make(chan *createOp, 4*maxGroup), stop: make(chan struct{}), stopped: make(chan struct{})}
	go g.run()
	return g
}

// close stops the committer and waits for it and the creates it handed off.
func (g *createGroups) close() {
	close(g.stop)
	<-g.stopped
	g.slow.Wait()
}

// create queues op and waits for its outcome, or for ctx to end while it
// is still queued.
func (g *createGroups) create(ctx context.Context, op *createOp) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case g.queue <- op:
	case <-g.stop:
		return task.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-op.done:
		return err
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opAbandoned) {
			return ctx.Err()
		}
	case <-g.stopped:
		if op.state.CompareAndSwap(opQueued, opAbandoned) {
			return task.ErrClosed
		}
	}
	return <-op.done // taken: the group decides
}

// run is the committer goroutine.
func (g *createGroups) run() {
	defer close(g.stopped)
	var next []*createOp // creates put off to the next group
	for {
		group := next
		next = nil
		if len(group) == 0 {
			select {
			case op := <-g.queue:
				group = g.take(group, op)
			case <-g.stop:
				return
			}
		}
		if hook := g.beforeGroup.Load(); hook != nil {
			(*hook)()
		}
	drain:
		for len(group) < maxGroup {
			select {
			case op := <-g.queue:
				group = g.take(group, op)
			default:
				break drain
			}
		}
		if len(group) == 0 {
			continue
		}
		group, next = splitRepeats(group)
		g.commit(group)
	}
}

// take adds op to group unless its caller gave up on it.
func (g *createGroups) take(group []*createOp, op *createOp) []*createOp {
	if op.state.CompareAndSwap(opQueued, opTaken) {
		return append(group, op)
	}
	return group
}

// splitRepeats puts off to the next group a create whose id or whose
// owner's idempotency key an earlier create of the group has: its outcome
// depends on whether that one commits.
func splitRepeats(group []*createOp) (now, later []*createOp) {
	ids := make(map[string]bool, len(group))
	keys := make(map[string]bool)
	for _, op := range group {
		key := ""
		if op.t.IdempotencyKey != "" {
			key = string(op.owner) + "\x00" + op.t.IdempotencyKey
		}
		if ids[op.t.ID] || (key != "" && keys[key]) {
			later = append(later, op)
			continue
		}
		ids[op.t.ID] = true
		if key != "" {
			keys[key] = true
		}
		now = append(now, op)
	}
	return now, later
}

// groupLockTimeout is how long a group waits for a lock before it is split:
// well below the write deadline, which a single create still waits. The
// committer is one per replica, so every create of the replica waits with
// the group, and again with its owner's part after the split: long enough
// for another replica's group holding the row (milliseconds), short
// enough that a row held by a long transaction elsewhere costs the
// others a fraction of a second.
func (g *createGroups) groupLockTimeout() time.Duration {
	return min(g.writeTimeout/8, 250*time.Millisecond)
}

// commit writes group and delivers each create's outcome.
func (g *createGroups) commit(group []*createOp) {
	ctx, cancel := g.writeContext(context.Background())
	defer cancel()
	results, err := g.commitGroup(ctx, group)
	var lockErr *pgconn.PgError
	switch {
	case err == nil:
		now := time.Now()
		for i, op := range group {
			if results[i] == nil && op.t.Status.Terminal() {
				g.finished.put(op.t, len(op.data.record), now)
			}
			op.done <- results[i]
		}
	case errors.As(err, &lockErr) && lockErr.Code == "55P03": // lock_not_available
		g.splitByOwner(group)
	case unavailable(err) || len(group) == 1:
		for _, op := range group {
			op.done <- g.fail("creating task "+op.t.ID, err)
		}
	default: // narrow the failure down to the create at fault
		half := len(group) / 2
		g.commit(group[:half])
		g.commit(group[half:])
	}
}

// splitByOwner commits each owner's creates of group on their own; those of
// an owner that still wait for a lock go to a goroutine of their own.
func (g *createGroups) splitByOwner(group []*createOp) {
	var byOwner [][]*createOp
	for _, op := range group {
		i := slices.IndexFunc(byOwner, func(ops []*createOp) bool { return bytes.Equal(ops[0].quota, op.quota) })
		if i < 0 {
			byOwner = append(byOwner, nil)
			i = len(byOwner) - 1
		}
		byOwner[i] = append(byOwner[i], op)
	}
	if len(byOwner) == 1 {
		g.slow.Go(func() {
			for _, op := range group {
				op.done <- g.createAlone(op)
			}
		})
		return
	}
	for _, ops := range byOwner {
		g.commit(ops)
	}
}

// createAlone writes one create in a transaction of its own, waiting for
// locks up to the write deadline: the path of a create whose owner's row
// stayed locked longer than a group waits.
func (g *createGroups) createAlone(op *createOp) error {
	ctx, cancel := g.writeContext(context.Background())
	defer cancel()
	var refused error
	err := g.inTx(ctx, func(tx pgx.Tx) error {
		refused = nil
		// Locked even without a bound: the write of the row drops its
		// ceiling ([ownerBounds]), which this insert does not add to.
		if _, err := tx.Exec(ctx, g.q.lockOwner, op.quota); err != nil {
			return err
		}
		var err error
		if refused, err = g.conflict(ctx, tx, op.t, op.owner); refused != nil || err != nil {
			return err
		}
		if refused, err = g.overLimits(ctx, tx, op.quota, op.t.CreatedAt, op.maxActive, op.maxFinished); refused != nil || err != nil {
			return err
		}
		refused, err = g.insert(ctx, tx, op.t, op.owner, op.data)
		return err
	})
	if err != nil {
		return g.fail("creating task "+op.t.ID, err)
	}
	return refused
}

// errRaced reports a group whose insert found a row taken by a concurrent
// transaction after its lookups: it runs again, and its lookups see it.
var errRaced = errors.New("a row of the group was taken meanwhile")

// commitGroup writes group in one transaction, again on a serialization
// failure, a deadlock or a race; it returns each create's outcome.
func (g *createGroups) commitGroup(ctx context.Context, group []*createOp) ([]error, error) {
	var results []error
	var err error
	for range maxRetries {
		results, err = g.groupTx(ctx, group)
		if err == nil {
			g.groups.Add(1)
			return results, nil
		}
		if !g.again(err) && !errors.Is(err, errRaced) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("committing a group of %d creates: %w", len(group), err)
}

// groupTx runs writeGroup on a connection of its own. The transaction's
// BEGIN goes in the batch of its lookups and its COMMIT in the batch of its
// inserts, so that a group costs two round trips (three when it counts);
// what a failure leaves open is rolled back, and a connection that broke is
// dropped by the pool.
func (g *createGroups) groupTx(ctx context.Context, group []*createOp) ([]error, error) {
	conn, err := g.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	results, err := g.writeGroup(ctx, conn.Conn(), group)
	if conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		if _, rbErr := conn.Exec(ctx, "ROLLBACK"); rbErr != nil && err == nil {
			err = rbErr
		}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22012" { // insertTasks' guard: fewer rows than accepted
		err = errRaced
	}
	return results, err
}

// groupConn is the connection of a group's transaction.
type groupConn interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// knownKey is a stored task found by its owner's idempotency key.
type knownKey struct{ id, fingerprint string }

// groupLookups is what step 2 of a group reads.
type groupLookups struct {
	ids  map[string]bool
	keys map[string]knownKey // by owner hash and key, as keyOf has them
}

func keyOf(owner []byte, key string) string { return string(owner) + "\x00" + key }

// writeGroup is one run of a group's transaction (see the top of the file).
func (g *createGroups) writeGroup(ctx context.Context, tx groupConn, group []*createOp) ([]error, error) {
	owners := groupOwners(group)
	found, err := g.lookUp(ctx, tx, group, owners)
	if err != nil {
		return nil, err
	}
	if err := g.count(ctx, tx, owners); err != nil {
		return nil, err
	}
	results := make([]error, len(group))
	var accepted []*createOp
	for i, op := range group {
		if results[i], err = g.decide(ctx, tx, op, owners, found); err != nil {
			return nil, err
		}
		if results[i] == nil {
			accepted = append(accepted, op)
			findOwner(owners, op.quota).accepted++
		}
	}
	b := &pgx.Batch{}
	if len(accepted) > 0 {
		// insertTasks fails (division by zero) when it inserts fewer rows
		// than accepted: the COMMIT queued after it is then skipped.
		b.Queue(g.q.insertTasks, append(insertArgs(accepted), int64(len(accepted)))...)
		if args, ok := ceilingArgs(owners); ok {
			b.Queue(g.q.setCeilings, args...)
		}
	}
	b.Queue("COMMIT")
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return results, nil
}

// lookUp is steps 1 and 2 of a group, in one round trip: the lock
// timeout, the owners' rows locked (with their ceilings, [ownerBounds]), the
// ids and keys looked up.
func (g *createGroups) lookUp(ctx context.Context, tx groupConn, group []*createOp, owners []*ownerBounds) (groupLookups, error) {
	found := groupLookups{ids: map[string]bool{}, keys: map[string]knownKey{}}
	ids := make([]string, len(group))
	var keyOwners [][]byte
	var keys []string
	for i, op := range group {
		ids[i] = op.t.ID
		if op.t.IdempotencyKey != "" {
			keyOwners = append(keyOwners, op.owner)
			keys = append(keys, op.t.IdempotencyKey)
		}
	}
	hashes := make([][]byte, len(owners))
	for i, o := range owners {
		hashes[i] = o.hash
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(g.q.lockTimeout, fmt.Sprintf("%dms", max(1, g.groupLockTimeout().Milliseconds())))
	b.Queue(g.q.lockOwners, hashes).Query(func(rows pgx.Rows) error {
		var owner []byte
		var ceiling, from *int64
		_, err := pgx.ForEachRow(rows, []any{&owner, &ceiling, &from}, func() error {
			if o := findOwner(owners, owner); o != nil && ceiling != nil && from != nil {
				o.ceiling, o.ceilingFrom, o.known = *ceiling, *from, true
			}
			return nil
		})
		return err
	})
	b.Queue(g.q.existingIDs, ids).Query(func(rows pgx.Rows) error {
		var id string
		_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			found.ids[id] = true
			return nil
		})
		return err
	})
	if len(keys) > 0 {
		b.Queue(g.q.knownKeys, keyOwners, keys).Query(func(rows pgx.Rows) error {
			var owner []byte
			var key string
			var k knownKey
			_, err := pgx.ForEachRow(rows, []any{&owner, &key, &k.id, &k.fingerprint}, func() error {
				found.keys[keyOf(owner, key)] = k
				return nil
			})
			return err
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return groupLookups{}, err
	}
	return found, nil
}

// decide is step 3 for one create: its refusal, or nil when it is to be
// inserted (then counted in its owner's counts).
func (g *createGroups) decide(ctx context.Context, tx groupConn, op *createOp, owners []*ownerBounds, found groupLookups) (refused, err error) {
	if found.ids[op.t.ID] {
		return task.ErrExists, nil
	}
	if op.t.IdempotencyKey != "" {
		if k, ok := found.keys[keyOf(op.owner, op.t.IdempotencyKey)]; ok {
			if k.fingerprint != op.t.Fingerprint {
				return task.ErrIdempotencyMismatch, nil
			}
			return &task.DuplicateError{TaskID: k.id}, nil
		}
	}
	o := findOwner(owners, op.quota)
	terminal := op.t.Status.Terminal()
	if op.maxActive > 0 && !terminal && o.active >= op.maxActive {
		return &task.QuotaError{Limit: op.maxActive}, nil
	}
	now := op.t.CreatedAt.UnixNano()
	if op.maxFinished > 0 && o.finished+o.addedAt(now) >= op.maxFinished {
		// Counted at the group's earliest time, or a ceiling: count
		// exactly at this create's own time before refusing it.
		n := o.finished
		if now != o.since || !o.walked {
			if err := tx.QueryRow(ctx, g.q.countFinishedUpTo, op.quota, now, op.maxFinished).Scan(&n); err != nil {
				return nil, err
			}
		}
		if n+o.addedAt(now) >= op.maxFinished {
			return &task.QuotaError{Limit: op.maxFinished, Finished: true}, nil
		}
	}
	if terminal {
		o.added = append(o.added, op.t.ExpiresAt().UnixNano())
	} else {
		o.active++
	}
	return nil, nil
}

// insertArgs are the arrays of insertTasks for ops, sorted by owner,
// idempotency key and id: every group inserts in that order.
func insertArgs(ops []*createOp) []any {
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b *createOp) int {
		if c := bytes.Compare(a.owner, b.owner); c != 0 {
			return c
		}
		if c := strings.Compare(a.t.IdempotencyKey, b.t.IdempotencyKey); c != 0 {
			return c
		}
		return strings.Compare(a.t.ID, b.t.ID)
	})
	n := len(ops)
	ids, statuses, keys, fingerprints, holders := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	owners, records, summaries, quotas := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	created, expires, leaseExpires := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, op := range ops {
		t := op.t
		ids[i], owners[i], statuses[i], created[i], expires[i] = t.ID, op.owner, string(t.Status), t.CreatedAt.UnixNano(), t.ExpiresAt().UnixNano()
		keys[i], fingerprints[i], records[i], summaries[i] = t.IdempotencyKey, t.Fingerprint, op.data.record, op.data.summary
		holders[i], leaseExpires[i], quotas[i] = t.Lease.Holder, t.Lease.Expires.UnixNano(), quotaHash(t)
	}
	return []any{ids, owners, statuses, created, expires, keys, fingerprints, records, summaries, holders, leaseExpires, quotas}
}
