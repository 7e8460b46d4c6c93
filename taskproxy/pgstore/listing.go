package pgstore

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Listing. An owner's tasks are listed by (created_ns, id), and a cursor
// names the position of the last task a page returned, with a MAC of that
// position and the owner under a secret kept in the database: a store
// accepts only cursors issued to the same owner by a replica of the same
// database, and a forged one is refused (ErrInvalidCursor) rather than used.
// The format is the Badger store's.

// loadCursorSecret reads the secret, creating it on the first open; of
// replicas that open together, the first insert wins and all read it.
func (s *database) loadCursorSecret(ctx context.Context) ([]byte, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("pgstore: making a cursor secret: %w", err)
	}
	if _, err := s.pool.Exec(ctx, s.q.secretInit, secret); err != nil {
		return nil, fmt.Errorf("pgstore: storing the cursor secret: %w", err)
	}
	var stored []byte
	if err := s.pool.QueryRow(ctx, s.q.secretGet).Scan(&stored); err != nil {
		return nil, fmt.Errorf("pgstore: loading the cursor secret: %w", err)
	}
	if len(stored) != 32 {
		return nil, errors.New("pgstore: malformed cursor secret")
	}
	return stored, nil
}

// cursorSigner issues and checks the cursors of the owners' listings and
// of the admin listing. A cursor is signed under a domain: an owner's is
// the hex of the owner's hash, the admin listing's is adminDomain, which
// is not one, so neither kind of cursor is accepted for the other.
type cursorSigner struct {
	cursorSecret []byte
}

// adminDomain is the domain of the admin listing's cursors.
const adminDomain = "admin"

// ownerDomain is the domain of the owner's cursors.
func ownerDomain(owner string) string { return hex.EncodeToString(ownerHash(owner)) }

func (s *cursorSigner) cursorMAC(domain string, pos []byte) []byte {
	m := hmac.New(sha256.New, s.cursorSecret)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write(pos)
	return m.Sum(nil)[:16]
}

func position(createdNs int64, id string) []byte {
	return fmt.Appendf(nil, "%016x/%s", uint64(createdNs), id)
}

// issueCursor returns the cursor of a listing position under domain.
func (s *cursorSigner) issueCursor(domain string, createdNs int64, id string) string {
	pos := position(createdNs, id)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(pos) + "." + enc.EncodeToString(s.cursorMAC(domain, pos))
}

// readCursor returns the position of a cursor the store issued under
// domain.
func (s *cursorSigner) readCursor(domain, cursor string) (int64, string, error) {
	enc := base64.RawURLEncoding
	p, m, ok := strings.Cut(cursor, ".")
	if !ok {
		return 0, "", task.ErrInvalidCursor
	}
	pos, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.cursorMAC(domain, pos)) || len(pos) < 18 || pos[16] != '/' {
		return 0, "", task.ErrInvalidCursor
	}
	created, err := strconv.ParseUint(string(pos[:16]), 16, 64)
	if err != nil {
		return 0, "", task.ErrInvalidCursor
	}
	return int64(created), string(pos[17:]), nil
}

// lister lists an owner's tasks, with signed cursors, and the pages of
// every owner's active tasks that recovery and takeover walk ([lister.ListExpiredLeases]).
type lister struct {
	*database
	*cursorSigner
}

// List pages through the owner's tasks, oldest first, reading their
// summaries; see task.Store.
func (s *lister) List(ctx context.Context, owner, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed.Load() {
		return nil, "", task.ErrClosed
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("pgstore: listing with limit %d", limit)
	}
	afterNs, afterID := int64(math.MinInt64), ""
	if cursor != "" {
		var err error
		if afterNs, afterID, err = s.readCursor(ownerDomain(owner), cursor); err != nil {
			return nil, "", err
		}
	}
	p, err := readAgain(ctx, s.database, func(q reader) (page, error) { return s.listPage(ctx, q, owner, afterNs, afterID, limit) })
	return p.tasks, p.cursor, err
}

// page is a page of a listing and the cursor of the next.
type page struct {
	tasks  []*task.Task
	cursor string
}

// listPage is List's read of the database, on q.
func (s *lister) listPage(ctx context.Context, q reader, owner string, afterNs int64, afterID string, limit int) (page, error) {
	rows, err := q.Query(ctx, s.q.list, ownerHash(owner), afterNs, afterID, limit+1)
	if err != nil {
		return page{}, s.fail("listing tasks", err)
	}
	defer rows.Close()
	var tasks []*task.Task
	var lastNs int64
	var lastID string
	for rows.Next() {
		if len(tasks) == limit {
			return page{tasks, s.issueCursor(ownerDomain(owner), lastNs, lastID)}, nil
		}
		var record []byte
		var holder *string
		var expires *int64
		if err := rows.Scan(&lastID, &lastNs, &record, &holder, &expires); err != nil {
			return page{}, s.fail("listing tasks", err)
		}
		t, err := decodeTask(record, holder, expires)
		if err != nil {
			return page{}, s.fail("listing tasks", err)
		}
		tasks = append(tasks, t.Summary()) // the same, whether the row had a summary or only its record
	}
	if err := rows.Err(); err != nil {
		return page{}, s.fail("listing tasks", err)
	}
	return page{tasks: tasks}, nil
}

// CountActive returns how many of the owner's tasks are not terminal.
func (s *lister) CountActive(ctx context.Context, owner string) (int, error) {
	if s.closed.Load() {
		return 0, task.ErrClosed
	}
	return readAgain(ctx, s.database, func(q reader) (int, error) {
		var n int
		if err := q.QueryRow(ctx, s.q.countActive, ownerHash(owner)).Scan(&n); err != nil {
			return 0, s.fail("counting active tasks", err)
		}
		return n, nil
	})
}

// ListActive pages through every owner's non-terminal tasks by id, for
// recovery; the cursor is the last id returned (an internal cursor, never
// shown to clients).
func (s *lister) ListActive(ctx context.Context, cursor string, limit int) ([]*task.Task, string, error) {
	if s.closed.Load() {
		return nil, "", task.ErrClosed
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("pgstore: listing with limit %d", limit)
	}
	rows, err := s.pool.Query(ctx, s.q.listActive, cursor, limit+1)
	if err != nil {
		return nil, "", s.fail("listing active tasks", err)
	}
	return s.idPage(rows, limit, "listing active tasks")
}

// idPage reads up to limit tasks from rows of (id, record, lease holder,
// lease expiry), ordered by id with one row more than the page, and
// returns them with the cursor of the next page: the last id returned, or
// "" when there is none.
func (s *lister) idPage(rows pgx.Rows, limit int, what string) ([]*task.Task, string, error) {
	defer rows.Close()
	var tasks []*task.Task
	for rows.Next() {
		if len(tasks) == limit {
			return tasks, tasks[len(tasks)-1].ID, nil
		}
		var id string
		var record []byte
		var holder *string
		var expires *int64
		if err := rows.Scan(&id, &record, &holder, &expires); err != nil {
			return nil, "", s.fail(what, err)
		}
		t, err := decodeTask(record, holder, expires)
		if err != nil {
			return nil, "", s.fail(what, err)
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.fail(what, err)
	}
	return tasks, "", nil
}
