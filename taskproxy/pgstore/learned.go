package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What the gateway learned of upstreams: rows of the meta table, keyed
// "learned/" and the hex SHA-256 of the key, whose value is the wall-clock
// time it expires at (unix ns, a varint) followed by the value.
// The meta table is in every schema version, so no migration is needed and
// replicas of an earlier version, which never read these rows, run beside
// ones that write them. An expired row counts as none and is replaced by the
// next save; there is one per configured route at most.

// learned keeps what was learned of upstreams.
type learned struct {
	*database
}

func learnedMetaKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "learned/" + hex.EncodeToString(sum[:])
}

// SaveLearned stores value under key for ttl.
func (l *learned) SaveLearned(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if l.closed.Load() {
		return task.ErrClosed
	}
	ctx, cancel := l.writeContext(ctx)
	defer cancel()
	row := binary.AppendVarint(make([]byte, 0, binary.MaxVarintLen64+len(value)), time.Now().Add(ttl).UnixNano())
	if _, err := l.pool.Exec(ctx, l.q.learnedSave, learnedMetaKey(key), append(row, value...)); err != nil {
		return l.fail("storing what was learned of an upstream", err)
	}
	return nil
}

// LoadLearned returns the value stored under key.
func (l *learned) LoadLearned(ctx context.Context, key string) ([]byte, error) {
	if l.closed.Load() {
		return nil, task.ErrClosed
	}
	var row []byte
	err := l.pool.QueryRow(ctx, l.q.learnedLoad, learnedMetaKey(key)).Scan(&row)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, task.ErrNotFound
	case err != nil:
		return nil, l.fail("reading what was learned of an upstream", err)
	}
	expires, n := binary.Varint(row)
	if n <= 0 || expires <= time.Now().UnixNano() {
		return nil, task.ErrNotFound
	}
	return row[n:], nil
}

// The seam is the task.LearnedStore part of the store contract on its own.
var _ task.LearnedStore = (*learned)(nil)
