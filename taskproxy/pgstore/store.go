package pgstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Options configures Open.
type Options struct {
	// DSN is the PostgreSQL connection string (a URL or key=value pairs,
	// as libpq and pgx accept them).
	DSN string
	// Schema is the schema that holds the store's tables; it is created
	// if missing. Empty means DefaultSchema. Two gateways on one database
	// share tasks only when they use the same schema.
	Schema string
	// MaxConns caps the connection pool; 0 keeps pgx's default (the
	// greater of 4 and the number of CPUs).
	MaxConns int32
	// MaxRecordBytes caps the encoded size of one task record; a write of
	// a larger one fails alone with task.ErrRecordTooLarge. 0 means
	// task.DefaultMaxRecordBytes.
	MaxRecordBytes int
	// WriteTimeout bounds one write. Writes do not follow the caller's
	// cancellation once under way, as in the Badger store: a write a
	// client walked away from still lands or fails as a whole. A create
	// whose caller left while it still waited for its group ([createGroups]) is
	// dropped, unwritten. 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// EventPoll is how often a replica re-reads the tasks it has waiters
	// for ([relay]), so that a lost notification only delays a wake-up.
	// 0 means DefaultEventPoll; negative turns polling off.
	EventPoll time.Duration
	// NoNotify turns LISTEN/NOTIFY off: replicas learn of each other's
	// changes by polling alone (for a pooler that does not carry LISTEN).
	NoNotify bool
	// Logger receives the store's debug messages (notifications dropped
	// because they are not sealed events of the schema); nil discards them.
	Logger *zap.Logger
}

// DefaultSchema is the schema of the store unless configured.
const DefaultSchema = "mcp_tasks"

// DefaultWriteTimeout bounds a write unless configured.
const DefaultWriteTimeout = 30 * time.Second

// Store is the task.Store on PostgreSQL. It puts together the seams
// below, each a small type with the state it needs, and holds the database
// handle they share, which they point to; their methods are the Store's
// through embedding.
type Store struct {
	database    // the pool, the schema's SQL, the write deadline and the closed flag
	taskRows    // creates, reads and updates of a task's row
	lister      // an owner's listing and the store-wide active and expired-lease ones ([lister.ListExpiredLeases])
	adminLister // every owner's tasks for the admin API
	leases      // lease rows
	leadership  // leaderships of duties one replica does for all
	sessions    // session bindings
	learned     // what was learned of upstreams
	sweeper     // expiry of tasks, tombstones and bindings
	events      // events between replicas: LISTEN/NOTIFY and polling ([relay])
	// holder names this opening of the store as a lease holder (newHolder).
	holder string
}

// database is the pool with what every call of the store needs: the
// schema's SQL, the deadline of a write, and whether the store was closed.
type database struct {
	pool         *pgxpool.Pool
	schema       string
	q            queries
	writeTimeout time.Duration
	closed       atomic.Bool
	// finished is the cache of finished tasks' records ([finishedCache]).
	finished finishedCache
	// deadlocks counts the transactions the server broke as deadlocked
	// (each then ran again): none is expected, as every transaction takes
	// its locks in one order (owner rows, then task rows), and tests check.
	deadlocks atomic.Uint64
}

// Open connects, creates or migrates the schema (safe when several
// processes open at once), and loads the cursor secret.
func Open(ctx context.Context, o Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parsing the DSN: %w", err) // pgx redacts the password from its message
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	schema := o.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connecting: %w", err)
	}
	s := &Store{database: database{pool: pool, schema: schema, q: newQueries(pgx.Identifier{schema}.Sanitize()), writeTimeout: o.WriteTimeout}}
	db := &s.database
	if s.writeTimeout <= 0 {
		s.writeTimeout = DefaultWriteTimeout
	}
	maxRecord := o.MaxRecordBytes
	if maxRecord <= 0 {
		maxRecord = task.DefaultMaxRecordBytes
	}
	log := o.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if err := checkServer(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if err := migrate(ctx, pool, schema); err != nil {
		pool.Close()
		return nil, err
	}
	secret, err := db.loadCursorSecret(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	cursors := &cursorSigner{cursorSecret: secret}
	s.taskRows = taskRows{database: db, maxRecord: maxRecord}
	s.lister = lister{database: db, cursorSigner: cursors}
	s.adminLister = adminLister{database: db, cursorSigner: cursors}
	s.leases = leases{database: db}
	s.leadership = leadership{database: db}
	s.sessions = sessions{database: db}
	s.learned = learned{database: db}
	s.sweeper = sweeper{database: db}
	s.events = events{database: db, eventPoll: o.EventPoll, noNotify: o.NoNotify, log: log}
	if s.eventAEAD, s.eventChannel, err = eventKeys(secret); err != nil {
		pool.Close()
		return nil, err
	}
	s.holder, err = newHolder()
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.groups = newCreateGroups(&s.taskRows)
	s.updates = newUpdateGroups(&s.taskRows)
	return s, nil
}

// newHolder names this opening of the store as a lease holder: host, pid and
// a random part, so that it is unique among replicas and across restarts.
func newHolder() (string, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pgstore: naming the lease holder: %w", err)
	}
	return fmt.Sprintf("pg/%s/p%d/%s", host, os.Getpid(), hex.EncodeToString(b[:])), nil
}

// Holder names this process as a lease holder of this store.
func (s *Store) Holder() string { return s.holder }

// Close closes the pool; later calls to any method return ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.groups.close()  // creates still queued fail with ErrClosed
	s.updates.close() // and updates
	s.pool.Close()    // waits for the connections in use to come back
	return nil
}

// fail wraps err with what failed, and reports ErrClosed for a call that
// raced Close. An error of reaching the database is also
// task.ErrUnavailable ([unavailable]).
func (s *database) fail(what string, err error) error {
	if s.closed.Load() {
		return task.ErrClosed
	}
	if unavailable(err) {
		return fmt.Errorf("pgstore: %s: %w: %w", what, task.ErrUnavailable, err)
	}
	return fmt.Errorf("pgstore: %s: %w", what, err)
}

// writeContext gives a write its own deadline, detached from the caller's
// cancellation.
func (s *database) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), s.writeTimeout)
}

// ownerHash is the stored form of an owner key: fixed size, whatever the
// principal looks like (the same hash as the Badger store's).
func ownerHash(owner string) []byte {
	sum := sha256.Sum256([]byte(owner))
	return sum[:16]
}

func sessionHash(id string) []byte {
	sum := sha256.Sum256([]byte(id))
	return sum[:]
}

// retryable reports whether a transaction failed only because of a
// concurrent one and may simply run again.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") // serialization failure, deadlock
}

// again is retryable, counting deadlocks.
func (s *database) again(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
		s.deadlocks.Add(1)
	}
	return retryable(err)
}

const maxRetries = 20

// readCommitted is the isolation the store's transactions are written for
// (row locks and guarded writes, each statement seeing what committed before
// it), whatever the server's default.
var readCommitted = pgx.TxOptions{IsoLevel: pgx.ReadCommitted}

// inTx runs fn in a transaction, again when it failed on a concurrent one.
func (s *database) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	var err error
	for range maxRetries {
		err = pgx.BeginTxFunc(ctx, s.pool, readCommitted, fn)
		if !s.again(err) {
			return err
		}
	}
	return err
}

var (
	_ task.Store         = (*Store)(nil)
	_ task.SummaryReader = (*Store)(nil)
)
