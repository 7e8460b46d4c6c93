package pgstore

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strconv"
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
// filters on what only the record holds (principal, tool).
const adminScanBatch = 500

// ListAll returns up to limit tasks of every owner that match filter,
// newest first; see task.AdminLister. Its cursor is signed like an
// owner's, under another domain, so neither is accepted for the other.
func (s *Store) ListAll(ctx context.Context, filter task.TaskFilter, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed.Load() {
		return nil, "", task.ErrClosed
	}
	afterNs, afterID := int64(math.MaxInt64), ""
	if cursor != "" {
		var err error
		if afterNs, afterID, err = s.readAdminCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	if limit <= 0 {
		return nil, "", nil
	}
	query := strings.ReplaceAll(adminListSQL, "{s}", pgx.Identifier{s.schema}.Sanitize())
	batch := limit + 1
	if filter.Principal != "" || filter.Tool != "" {
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
			return tasks, s.adminCursor(lastNs, lastID), nil
		case n < batch:
			return tasks, "", nil
		}
	}
}

// adminBatch reads one batch after (*afterNs, *afterID), appends the tasks
// that match, and moves the position on. full reports that the page is
// full and more rows follow.
func (s *Store) adminBatch(ctx context.Context, query string, filter task.TaskFilter, afterNs *int64, afterID *string,
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

// adminMAC signs a listing position for the admin listing. Owners' cursors
// sign the hex of an owner hash first; "admin" is not one, so the two
// never sign the same bytes.
func (s *Store) adminMAC(pos []byte) []byte {
	m := hmac.New(sha256.New, s.cursorSecret)
	m.Write([]byte("admin"))
	m.Write([]byte{0})
	m.Write(pos)
	return m.Sum(nil)[:16]
}

func (s *Store) adminCursor(createdNs int64, id string) string {
	pos := position(createdNs, id)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(pos) + "." + enc.EncodeToString(s.adminMAC(pos))
}

func (s *Store) readAdminCursor(cursor string) (int64, string, error) {
	enc := base64.RawURLEncoding
	p, m, ok := strings.Cut(cursor, ".")
	if !ok {
		return 0, "", task.ErrInvalidCursor
	}
	pos, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.adminMAC(pos)) || len(pos) < 18 || pos[16] != '/' {
		return 0, "", task.ErrInvalidCursor
	}
	created, err := strconv.ParseUint(string(pos[:16]), 16, 64)
	if err != nil {
		return 0, "", task.ErrInvalidCursor
	}
	return int64(created), string(pos[17:]), nil
}

// GetAny returns the task with id whatever its owner; a task swept less
// than a ttl ago gives ErrExpired.
func (s *Store) GetAny(ctx context.Context, id string) (*task.Task, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	r, err := scanRow(s.pool.QueryRow(ctx, s.q.get, id))
	switch {
	case err == nil:
		return r.tk, nil
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, s.fail("reading task "+id, err)
	}
	var stoneOwner []byte
	err = s.pool.QueryRow(ctx, s.q.tombstone, id, time.Now().UnixNano()).Scan(&stoneOwner)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, task.ErrNotFound
	case err != nil:
		return nil, s.fail(fmt.Sprintf("reading the tombstone of task %s", id), err)
	}
	return nil, task.ErrExpired
}

var _ task.AdminLister = (*Store)(nil)
