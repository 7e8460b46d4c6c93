package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Operator access for the admin API (task.AdminLister): every owner's
// tasks, newest first, and lookups by id alone. Operators page rarely, so
// the listing uses no index of its own (it sorts the tasks table, which the
// sweep bounds) and its SQL is built per call rather than kept at open.

// adminListSQL pages backwards through (created_ns, id), optionally of one
// status, reading the tasks' summaries (the records of rows without one).
const adminListSQL = `SELECT t.id, t.created_ns, coalesce(t.summary, t.record), l.holder, l.expires_ns
	FROM {s}.tasks t LEFT JOIN {s}.leases l ON l.task_id = t.id
	WHERE (t.created_ns, t.id) < ($1, $2) AND ($3 = '' OR t.status = $3)
	ORDER BY t.created_ns DESC, t.id DESC LIMIT $4`

// adminScanBatch is how many rows a listing reads per query when it
// filters on what only the record holds (principal, tenant, route, tool,
// creation time).
const adminScanBatch = 500

// adminLister lists and looks up every owner's tasks for operators.
type adminLister struct {
	*database
	*cursorSigner
}

// ListAll returns up to limit tasks of every owner that match filter,
// newest first; see task.AdminLister. Its cursor is signed like an
// owner's, under another domain, so neither is accepted for the other.
func (s *adminLister) ListAll(ctx context.Context, filter task.TaskFilter, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed.Load() {
		return nil, "", task.ErrClosed
	}
	afterNs, afterID := int64(math.MaxInt64), ""
	if cursor != "" {
		var err error
		if afterNs, afterID, err = s.readCursor(adminDomain, cursor); err != nil {
			return nil, "", err
		}
	}
	if limit <= 0 {
		return nil, "", nil
	}
	query := strings.ReplaceAll(adminListSQL, "{s}", pgx.Identifier{s.schema}.Sanitize())
	batch := limit + 1
	if !filter.OnlyStatus() {
		batch = max(batch, adminScanBatch)
	}
	var tasks []*task.Task
	var lastNs int64
	var lastID string
	for {
		n, full, err := s.adminBatch(ctx, query, filter, &afterNs, &afterID, batch, limit, &tasks, &lastNs, &lastID)
		switch {
		case err != nil:
			return nil, "", s.fail("listing every owner's tasks", err)
		case full:
			return tasks, s.issueCursor(adminDomain, lastNs, lastID), nil
		case n < batch:
			return tasks, "", nil
		}
	}
}

// adminBatch reads one batch after (*afterNs, *afterID), appends the tasks
// that match, and moves the position on. full reports that the page is
// full and more rows follow.
func (s *adminLister) adminBatch(ctx context.Context, query string, filter task.TaskFilter, afterNs *int64, afterID *string,
	batch, limit int, tasks *[]*task.Task, lastNs *int64, lastID *string) (n int, full bool, err error) {
	rows, err := s.pool.Query(ctx, query, *afterNs, *afterID, string(filter.Status), batch)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		if len(*tasks) == limit {
			return n, true, nil
		}
		n++
		var id string
		var created int64
		var record []byte
		var holder *string
		var expires *int64
		if err := rows.Scan(&id, &created, &record, &holder, &expires); err != nil {
			return n, false, err
		}
		*afterNs, *afterID = created, id
		t, err := decodeTask(record, holder, expires)
		if err != nil {
			return n, false, err
		}
		if t = t.Summary(); filter.Match(t) {
			*tasks = append(*tasks, t)
			*lastNs, *lastID = created, id
		}
	}
	return n, false, rows.Err()
}

// GetAny returns the task with id whatever its owner; a task swept less
// than a ttl ago gives ErrExpired.
func (s *adminLister) GetAny(ctx context.Context, id string) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	return readAgain(ctx, s.database, func(q reader) (*task.Task, error) { return s.getAny(ctx, q, id) })
}

// getAny is GetAny's read of the database, on q.
func (s *adminLister) getAny(ctx context.Context, q reader, id string) (*task.Task, error) {
	r, err := scanRow(q.QueryRow(ctx, s.q.get, id))
	switch {
	case err == nil:
		return r.tk, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, s.fail("reading task "+id, err)
	}
	var stoneOwner []byte
	err = q.QueryRow(ctx, s.q.tombstone, id, time.Now().UnixNano()).Scan(&stoneOwner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, task.ErrNotFound
	case err != nil:
		return nil, s.fail(fmt.Sprintf("reading the tombstone of task %s", id), err)
	}
	return nil, task.ErrExpired
}

var _ task.AdminLister = (*Store)(nil)
