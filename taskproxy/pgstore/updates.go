package pgstore

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Group commit of updates (a task's outcome, its status changes). As with
// creates ([createGroups]), updates are queued to one committer goroutine, which
// takes whatever is waiting (up to maxGroup, one update per task; a second
// update of a task waits for the next round) and writes them together:
//
//  1. the tasks' rows are read in one statement (each by its id and its
//     owner, so another owner's record is never read);
//  2. each update's fn runs on its copy, on the committer's goroutine (as
//     in the Badger store: fn must not block nor call the store); a missing,
//     foreign or terminal task, or fn's refusal, is that update's outcome;
//  3. the new records are written in one statement, each a compare-and-set
//     on the version read, which also locks the rows in the order of their
//     ids (as every multi-row write here does); a task terminal now loses
//     its lease in the same statement. One statement is one commit.
//
// An update whose compare-and-set lost (the task changed meanwhile) runs
// again in the next round, reading the new record. An update that changes
// the lease itself, one that keeps losing, and every update of a round that
// failed on anything but an unreachable database are written alone by the
// path of a single update (updateAlone), on a goroutine of their own, so
// that one of them never fails the others.

// updateOp is one update waiting for the committer.
type updateOp struct {
	owner     string
	ownerHash []byte
	id        string
	fn        func(*task.Task) error
	tries     int
	done      chan updateResult // buffered
	// cur is the row read, nextTask and nextRecord what fn made of it.
	cur        *row
	nextTask   *task.Task
	nextRecord encoded
}

type updateResult struct {
	t   *task.Task
	err error
}

// groupTries is how many rounds an update runs in groups before it is
// written alone, taking the row's lock (Update's locked path).
const groupTries = 3

// updateGroups is the group committer of updates.
type updateGroups struct {
	*taskRows
	queue         chan *updateOp
	stop, stopped chan struct{}
	alone         sync.WaitGroup
	// groups counts the update statements committed (for tests).
	groups atomic.Uint64
	// beforeGroup, when set (by tests), runs in the committer once it has
	// the first update of a round and before it takes the others.
	beforeGroup atomic.Pointer[func()]
}

func newUpdateGroups(rows *taskRows) *updateGroups {
	g := &updateGroups{taskRows: rows, queue: make(chan *updateOp, 4*maxGroup), stop: make(chan struct{}), stopped: make(chan struct{})}
	go g.run()
	return g
}

func (g *updateGroups) close() {
	close(g.stop)
	<-g.stopped
	g.alone.Wait()
}

// update queues op and waits for its outcome; like every write, it does
// not follow the caller's cancellation.
func (g *updateGroups) update(op *updateOp) (*task.Task, error) {
	select {
	case g.queue <- op:
	case <-g.stop:
		return nil, task.ErrClosed
	}
	select {
	case r := <-op.done:
		return r.t, r.err
	case <-g.stopped:
	}
	// The committer has returned: op was answered, is being written alone,
	// or came in too late to be taken.
	g.alone.Wait()
	select {
	case r := <-op.done:
		return r.t, r.err
	default:
		return nil, task.ErrClosed
	}
}

func (g *updateGroups) run() {
	defer close(g.stopped)
	var next []*updateOp
	for {
		group := next
		if len(group) == 0 {
			select {
			case op := <-g.queue:
				group = append(group, op)
			case <-g.stop:
				g.drainClosed()
				return
			}
			if hook := g.beforeGroup.Load(); hook != nil {
				(*hook)()
			}
		}
	drain:
		for len(group) < maxGroup {
			select {
			case op := <-g.queue:
				group = append(group, op)
			default:
				break drain
			}
		}
		group, later := splitSameTask(group)
		next = append(later, g.round(group)...)
	}
}

// drainClosed answers the updates still queued once the store closed.
func (g *updateGroups) drainClosed() {
	for {
		select {
		case op := <-g.queue:
			op.done <- updateResult{err: task.ErrClosed}
		default:
			return
		}
	}
}

// splitSameTask puts off to the next round an update of a task an earlier
// update of the group writes.
func splitSameTask(group []*updateOp) (now, later []*updateOp) {
	seen := make(map[string]bool, len(group))
	for _, op := range group {
		if seen[op.id] {
			later = append(later, op)
			continue
		}
		seen[op.id] = true
		now = append(now, op)
	}
	return now, later
}

// alone writes op by the path of a single update, on a goroutine of its own.
func (g *updateGroups) aloneOp(op *updateOp) {
	g.alone.Go(func() {
		t, err := g.updateAlone(context.Background(), op.owner, op.id, op.fn)
		op.done <- updateResult{t, err}
	})
}

// round runs one round of group and returns the updates that lost their
// compare-and-set, for the next.
func (g *updateGroups) round(group []*updateOp) (again []*updateOp) {
	ctx, cancel := g.writeContext(context.Background())
	defer cancel()
	failed := group // the updates a failure leaves without an answer
	writes, err := g.readApply(ctx, group)
	if err == nil {
		if len(writes) == 0 {
			return nil
		}
		failed = writes
		var written map[string]bool
		if written, err = g.writeAll(ctx, writes); err == nil {
			g.groups.Add(1)
			for _, op := range writes {
				switch {
				case written[op.id]:
					t := op.nextTask
					if t.Status.Terminal() {
						t.Lease = task.Lease{}
						g.finished.put(t, len(op.nextRecord.record), time.Now())
					}
					op.done <- updateResult{t: t}
				case op.tries >= groupTries:
					g.aloneOp(op)
				default:
					again = append(again, op)
				}
			}
			return again
		}
	}
	for _, op := range failed {
		if unavailable(err) {
			op.done <- updateResult{err: g.fail("updating task "+op.id, err)}
		} else {
			g.aloneOp(op)
		}
	}
	return nil
}

// readApply reads the rows of group and applies each update; it answers
// the updates that end there (refused, or handed to the single path) and
// returns those to write.
func (g *updateGroups) readApply(ctx context.Context, group []*updateOp) ([]*updateOp, error) {
	ids := make([]string, len(group))
	owners := make([][]byte, len(group))
	for i, op := range group {
		ids[i], owners[i] = op.id, op.ownerHash
	}
	found := make(map[string]*row, len(group))
	b := &pgx.Batch{} // one round trip, in one implicit transaction
	b.Queue("SELECT " + genericPlans)
	b.Queue(g.q.getOwnMany, ids, owners).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			r, err := scanRow(idRow{&id, rows})
			if err != nil {
				return err
			}
			found[id] = r
		}
		return rows.Err()
	})
	if err := g.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	var missing []string
	for _, op := range group {
		if found[op.id] == nil {
			missing = append(missing, op.id)
		}
	}
	foreign := map[string]bool{}
	if len(missing) > 0 {
		rows, err := g.pool.Query(ctx, g.q.existingIDs, missing)
		if err != nil {
			return nil, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			foreign[id] = true
		}
	}
	var writes []*updateOp
	for _, op := range group {
		op.tries++
		cur := found[op.id]
		var outcome error
		switch {
		case cur == nil && foreign[op.id]:
			outcome = task.ErrForeign
		case cur == nil:
			outcome = task.ErrNotFound
		case cur.tk.Status.Terminal():
			outcome = task.ErrTerminal
		}
		if outcome != nil {
			op.done <- updateResult{err: outcome}
			continue
		}
		next, refused := g.apply(cur.tk, op.fn)
		if refused == nil {
			op.nextRecord, refused = g.encodeRecord(next)
		}
		if refused != nil {
			op.done <- updateResult{err: refused}
			continue
		}
		if !next.Status.Terminal() && next.Lease != cur.tk.Lease {
			g.aloneOp(op) // the lease changes with the record: the single path
			continue
		}
		op.cur, op.nextTask = cur, next
		writes = append(writes, op)
	}
	return writes, nil
}

// idRow scans the id before a task row's columns (getOwnMany).
type idRow struct {
	id *string
	r  pgx.Row
}

func (r idRow) Scan(dest ...any) error { return r.r.Scan(append([]any{r.id}, dest...)...) }

// writeAll writes the new records of writes in one statement and returns
// the ids whose compare-and-set landed.
func (g *updateGroups) writeAll(ctx context.Context, writes []*updateOp) (map[string]bool, error) {
	writes = slices.Clone(writes)
	slices.SortFunc(writes, func(a, b *updateOp) int { return strings.Compare(a.id, b.id) })
	n := len(writes)
	ids, statuses, keys, fingerprints := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	versions := make([]int64, n)
	records, summaries := make([][]byte, n), make([][]byte, n)
	terminal := make([]bool, n)
	for i, op := range writes {
		t := op.nextTask
		ids[i], versions[i], statuses[i], keys[i], fingerprints[i] = t.ID, op.cur.version, string(t.Status), t.IdempotencyKey, t.Fingerprint
		records[i], summaries[i], terminal[i] = op.nextRecord.record, op.nextRecord.summary, t.Status.Terminal()
	}
	var written map[string]bool
	var err error
	for range maxRetries {
		var rows pgx.Rows
		rows, err = g.pool.Query(ctx, g.q.casMany, ids, versions, statuses, keys, fingerprints, records, summaries, terminal)
		if err == nil {
			var got []string
			got, err = pgx.CollectRows(rows, pgx.RowTo[string])
			if err == nil {
				written = make(map[string]bool, len(got))
				for _, id := range got {
					written[id] = true
				}
				return written, nil
			}
		}
		if !g.again(err) {
			break
		}
	}
	return nil, err
}
