package badgerstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"
)

// Key layout (the store rules are in package task's doc):
//
//	t/<taskId>                                 the record, with its lease until that is renewed
//	h/<taskId>                                 its header: what listings show (head.go)
//	l/<taskId>                                 a renewed lease: renewing it writes only this
//	o/<owner hash>/<createdAt hex>/<taskId>    owner index: listing
//	a/<owner hash>/<taskId>                    active (non-terminal) index: quotas, recovery
//	f/<owner hash>/<expiresAt hex>/<taskId>    finished index: their bound (head.go)
//	e/<expiresAt hex>/<taskId>                 expiry index: the sweeper
//	i/<owner hash>/<key hash>                  idempotency keys: the task id
//	x/<taskId>                                 tombstone of a swept task: its owner hash
//	m/epoch                                    how many times the store was opened
//	m/cursor-secret                            the key that signs listing cursors
//	m/format                                   the format version (format.go)
//
// Owners are hashed so that keys have a fixed shape whatever the principal
// looks like. The sweeper deletes a task and its index keys together; only
// the tombstone carries a Badger TTL (one more ttl).

const maxConflictRetries = 64

// Options configures Open.
type Options struct {
	// Dir is the storage directory; empty with InMemory.
	Dir string
	// InMemory keeps everything in memory (tests only).
	InMemory bool
	// SyncWrites fsyncs every commit before it returns. Badger commits
	// concurrent transactions together, so one fsync covers many.
	SyncWrites bool
	// Logger receives Badger's own log lines; nil discards them.
	Logger *zap.Logger
	// MaxRecordBytes caps the encoded size of one task record; a write of
	// a larger one fails alone with ErrRecordTooLarge. 0 means
	// task.DefaultMaxRecordBytes; it is never more than Badger can store in
	// one value.
	MaxRecordBytes int
	// GCInterval is how often value-log garbage collection runs, so that
	// the space of swept tasks comes back whether or not a sweep just
	// deleted something. 0 means DefaultGCInterval; negative disables it.
	// An in-memory store has no value log to collect.
	GCInterval time.Duration
	// MinFreeBytes is the free space of the store's filesystem below which
	// writes are refused (task.ErrUnavailable) until there is room again
	// (diskguard.go). 0 means DefaultMinFreeBytes; negative checks only
	// that the filesystem takes writes.
	MinFreeBytes int64
}

// DefaultGCInterval is how often an on-disk store runs value-log garbage
// collection unless configured.
const DefaultGCInterval = 10 * time.Minute

// Store is the Store on an embedded Badger database.
type Store struct {
	db *badger.DB
	// epoch counts the opens of this store. Badger holds a directory lock,
	// so a lease held under an older epoch belongs to a process that is
	// gone and can be taken over at once.
	epoch  uint64
	holder string
	// cursorSecret signs listing cursors (cursor.go).
	cursorSecret []byte
	// maxRecord is the size limit of one encoded record.
	maxRecord int

	// guard checks the filesystem before writes (diskguard.go); nil in
	// memory.
	guard *diskGuard

	// gcStop ends the scheduled value-log GC (sweep.go); gcDone
	// closes when it has.
	gcStop, gcDone chan struct{}
	gcOnce         sync.Once

	// writes feeds the group committer (commit.go).
	writes        chan writeOp
	committerDone chan struct{}
	// live and staged are the committer's cache of live records
	// (livecache.go); only the committer goroutine touches them.
	live, staged map[string]*liveEntry

	mu     sync.RWMutex // guards closed against the methods in flight
	closed bool
}

var _ task.Store = (*Store)(nil)

// Open opens (creating if needed) a store with options sized for a
// small gateway rather than Badger's defaults, which reserve hundreds of MiB.
func Open(o Options) (*Store, error) {
	opts := badger.DefaultOptions(o.Dir).
		WithInMemory(o.InMemory).
		WithSyncWrites(o.SyncWrites).
		WithNumVersionsToKeep(1).
		WithMemTableSize(8 << 20).
		WithNumMemtables(2).
		WithBaseTableSize(2 << 20).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithValueThreshold(4 << 10).
		WithNumCompactors(2).
		WithNumLevelZeroTables(4).
		WithNumLevelZeroTablesStall(8).
		WithCompactL0OnClose(true).
		WithMetricsEnabled(false).
		WithLogger(badgerLogger{o.Logger})
	maxRecord := o.MaxRecordBytes
	if maxRecord <= 0 {
		maxRecord = task.DefaultMaxRecordBytes
	}
	// Badger refuses a value longer than a value-log file, and in memory
	// one above the value threshold, with an error that hex-dumps it.
	maxRecord = min(maxRecord, int(opts.ValueLogFileSize)/2)
	if o.InMemory {
		opts.Dir, opts.ValueDir = "", ""
		opts = opts.WithValueThreshold(1 << 20)
		maxRecord = min(maxRecord, int(opts.ValueThreshold)-1024)
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("opening badger at %q: %w", o.Dir, err)
	}
	s := &Store{db: db, writes: make(chan writeOp, maxBatch), committerDone: make(chan struct{}), maxRecord: maxRecord}
	if !o.InMemory {
		if s.guard, err = newDiskGuard(o.Dir, o.MinFreeBytes); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if err := s.checkFormat(); err != nil {
		s.guard.close()
		_ = db.Close()
		return nil, err
	}
	if err := s.nextEpoch(); err != nil {
		s.guard.close()
		_ = db.Close()
		return nil, err
	}
	if err := s.loadCursorSecret(); err != nil {
		s.guard.close()
		_ = db.Close()
		return nil, err
	}
	go s.commitWrites()
	s.gcStop, s.gcDone = make(chan struct{}), make(chan struct{})
	interval := o.GCInterval
	if interval == 0 {
		interval = DefaultGCInterval
	}
	if o.InMemory || interval < 0 {
		close(s.gcDone)
	} else {
		go s.collectGarbageEvery(interval, o.Logger)
	}
	return s, nil
}

// Close closes the database; later calls to any method return ErrClosed.
func (s *Store) Close() error {
	// The GC loop first: it takes s.mu, which is held below until the end.
	s.gcOnce.Do(func() { close(s.gcStop) })
	<-s.gcDone
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.writes)
	<-s.committerDone
	defer s.guard.close()
	return closeWithin(s.db.Close, closeTimeout)
}

// closeTimeout bounds how long Close waits for Badger. Badger's Close
// flushes the memtable and retries a failed flush for ever: on a
// filesystem turned read-only (or full) it would never return, and Caddy,
// which closes the store when it stops, would never exit. Nothing
// acknowledged is lost by not waiting: every write is in the memtable's
// write-ahead log already (fsync'd with sync_writes on), which the next
// open replays.
const closeTimeout = 10 * time.Second

// closeWithin runs closeDB and waits for it up to limit; a close that
// takes longer is left to finish (or not) in the background.
func closeWithin(closeDB func() error, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- closeDB() }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("closing badger: %w", err)
		}
		return nil
	case <-timer.C:
		return fmt.Errorf("closing badger: not done after %s (it retries writing its memtable; is the filesystem read-only or full?); what was written is in its write-ahead log, replayed at the next open", limit)
	}
}

// use runs fn unless the store is closed, keeping Close out meanwhile.
func (s *Store) use(fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return task.ErrClosed
	}
	return fn()
}

func recordKey(id string) []byte { return []byte("t/" + id) }

func ownerHash(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:16])
}

func ownerPrefix(owner string) []byte { return []byte("o/" + ownerHash(owner) + "/") }

func ownerKey(t *task.Task) []byte {
	return fmt.Appendf(ownerPrefix(t.Owner), "%016x/%s", t.CreatedAt.UnixNano(), t.ID)
}

func activePrefix(owner string) []byte { return []byte("a/" + ownerHash(owner) + "/") }

func activeKey(t *task.Task) []byte { return append(activePrefix(t.Owner), t.ID...) }

func expiryKey(t *task.Task) []byte {
	return fmt.Appendf(nil, "e/%016x/%s", t.ExpiresAt().UnixNano(), t.ID)
}

func leaseKey(id string) []byte { return []byte("l/" + id) }

// encodeRecord encodes t for storing, within the record size limit, with
// its lease when withLease is set and without it otherwise.
//
// Where a lease lives: a task is created with its lease in the record, so
// a task that ends before its lease is renewed (most do) never writes a
// lease key. The first renewal moves the lease out to its own key, so that
// renewing it every few seconds does not rewrite the record, arguments and
// all. A record this build writes with a lease therefore has no lease key
// (records of older builds may have both: readRecord); one without may
// have one. A terminal task holds no lease.
func (s *Store) encodeRecord(t *task.Task, withLease bool) ([]byte, error) {
	rec := t
	if !withLease && t.Lease != (task.Lease{}) {
		c := *t
		c.Lease = task.Lease{}
		rec = &c
	}
	data, err := task.EncodeRecord(rec)
	if err != nil {
		return nil, fmt.Errorf("encoding task %s: %w", t.ID, err)
	}
	if len(data) > s.maxRecord {
		return nil, &task.RecordTooLargeError{Size: len(data), Limit: s.maxRecord}
	}
	return data, nil
}

// getRecord reads task id with its lease, wherever the lease lives.
func getRecord(txn *badger.Txn, id string) (*task.Task, error) {
	t, _, err := readRecord(txn, id, "")
	return t, err
}

// getTask is getRecord for a method of s: it spares the lease key's
// lookup for a task whose record carries a lease of this opening
// (readRecord), which is every task created since the store was opened and
// not yet renewed.
func (s *Store) getTask(txn *badger.Txn, id string) (*task.Task, error) {
	t, _, err := readRecord(txn, id, s.holderPrefix())
	return t, err
}

// holderPrefix is what every lease holder of this opening of the store
// starts with (see nextEpoch).
func (s *Store) holderPrefix() string {
	return s.holder[:strings.IndexByte(s.holder, '/')+1]
}

// readRecord reads task id with its lease, and reports whether the lease
// is in the record (see encodeRecord) rather than under its own key.
//
// A record carrying a lease may still have a lease key, which then wins:
// the builds before this one renewed a lease by writing its key only,
// leaving whatever lease the record carried (one it was created with by a
// build before leases had keys, or by this build before a downgrade). Only
// a lease whose holder starts with current, this opening's prefix, is
// known to be the record's own: this process wrote it when it created the
// task, and no other build has written since. An empty current never
// skips the lookup.
func readRecord(txn *badger.Txn, id, current string) (*task.Task, bool, error) {
	item, err := txn.Get(recordKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, task.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading task %s: %w", id, err)
	}
	t, err := decodeItem(item, id)
	if err != nil {
		return nil, false, err
	}
	inRecord, err := resolveLease(txn, t, current)
	return t, inRecord, err
}

// decodeItem decodes the record of task id (recordHook counts it).
func decodeItem(item *badger.Item, id string) (*task.Task, error) {
	if hook := recordHook.Load(); hook != nil {
		(*hook)(id)
	}
	var t task.Task
	if err := item.Value(func(v []byte) error { return task.DecodeRecord(v, &t) }); err != nil {
		return nil, fmt.Errorf("decoding task %s: %w", id, err)
	}
	return &t, nil
}

// recordHook, when set (by tests only), is called each time a record's
// value is read.
var recordHook atomic.Pointer[func(id string)]

// resolveLease gives t, as its record or header has it, the lease that
// holds (see readRecord), and reports whether it is the record's own.
func resolveLease(txn *badger.Txn, t *task.Task, current string) (bool, error) {
	if t.Status.Terminal() || current != "" && strings.HasPrefix(t.Lease.Holder, current) {
		return t.Lease.Holder != "", nil
	}
	item, err := txn.Get(leaseKey(t.ID))
	switch {
	case err == nil:
		t.Lease = task.Lease{} // the key's lease, not a mix with the record's
		if err := item.Value(func(v []byte) error { return json.Unmarshal(v, &t.Lease) }); err != nil {
			return false, fmt.Errorf("decoding the lease of task %s: %w", t.ID, err)
		}
		return false, nil
	case !errors.Is(err, badger.ErrKeyNotFound):
		return false, fmt.Errorf("reading the lease of task %s: %w", t.ID, err)
	}
	return t.Lease.Holder != "", nil
}

// setLease stores the lease of task id, or deletes it when it is empty.
func setLease(txn *badger.Txn, id string, lease task.Lease) error {
	if lease.Holder == "" {
		return txn.Delete(leaseKey(id))
	}
	data, err := json.Marshal(lease)
	if err != nil {
		return fmt.Errorf("encoding the lease of task %s: %w", id, err)
	}
	return txn.Set(leaseKey(id), data)
}

// retryConflicts runs fn in a read-write transaction, again on the current
// data when a concurrent transaction conflicted with it: a compare-and-set.
func (s *Store) retryConflicts(ctx context.Context, what string, fn func(*badger.Txn) error) error {
	for range maxConflictRetries {
		if err := s.guard.check(); err != nil {
			return err
		}
		err := s.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s: gave up after %d conflicts", what, maxConflictRetries)
}

// Get returns the owner's task. The owner is checked on the task's header
// (head.go), so another owner's task is refused without reading its
// record, whatever its size.
func (s *Store) Get(ctx context.Context, owner, id string) (*task.Task, error) {
	var t *task.Task
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			rec, whole, err := checkOwner(txn, id, owner)
			switch {
			case errors.Is(err, task.ErrForeign):
				return err
			case errors.Is(err, task.ErrNotFound):
				return tombstone(txn, owner, id)
			case err != nil:
				return err
			case whole == nil:
				if whole, err = decodeItem(rec, id); err != nil {
					return err
				}
			}
			// As getTask: the lease of this opening in the record is its own.
			_, err = resolveLease(txn, whole, s.holderPrefix())
			t = whole
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// List pages through the owner index, reading the tasks' headers only.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) ([]*task.Task, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("listing tasks: the page size must be positive, got %d", limit)
	}
	prefix := ownerPrefix(owner)
	start := prefix
	if cursor != "" {
		pos, err := s.readCursor(owner, cursor)
		if err != nil {
			return nil, "", err
		}
		start = append(append(bytes.Clone(prefix), pos...), 0) // just past the last key returned
	}
	var tasks []*task.Task
	var next string
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
			defer it.Close()
			for it.Seek(start); it.ValidForPrefix(prefix); it.Next() {
				key := it.Item().Key()
				if len(tasks) == limit {
					next = s.issueCursor(owner, lastKeyPosition(tasks[len(tasks)-1]))
					return nil
				}
				id := string(key[bytes.LastIndexByte(key, '/')+1:])
				t, err := s.readSummary(txn, id)
				if errors.Is(err, task.ErrNotFound) {
					continue // swept between the index and the record
				}
				if err != nil {
					return err
				}
				tasks = append(tasks, t)
			}
			return nil
		})
	})
	if err != nil {
		return nil, "", err
	}
	return tasks, next, nil
}

func lastKeyPosition(t *task.Task) []byte {
	return fmt.Appendf(nil, "%016x/%s", t.CreatedAt.UnixNano(), t.ID)
}

// validCursorPosition checks the shape "<16 hex digits>/<task id>".
func validCursorPosition(pos []byte) bool {
	if len(pos) < 18 || pos[16] != '/' {
		return false
	}
	if _, err := hex.DecodeString(string(pos[:16])); err != nil {
		return false
	}
	for _, c := range pos[17:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CountActive counts the owner's non-terminal tasks from the active index,
// reading keys only.
func (s *Store) CountActive(ctx context.Context, owner string) (int, error) {
	n := 0
	err := s.use(func() error {
		return s.db.View(func(txn *badger.Txn) error {
			n = countActive(txn, owner, 0)
			return nil
		})
	})
	return n, err
}

// countActive counts the owner's active-index keys in txn, stopping at
// upTo when it is positive: a quota check reads no more than the quota.
func countActive(txn *badger.Txn, owner string, upTo int) int {
	prefix := activePrefix(owner)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	n := 0
	for it.Rewind(); it.ValidForPrefix(prefix) && (upTo <= 0 || n < upTo); it.Next() {
		n++
	}
	return n
}

// badgerLogger sends Badger's printf-style logging to zap; Badger's info
// lines are chatty, so they go to debug.
type badgerLogger struct{ l *zap.Logger }

func (b badgerLogger) logf(level func(string, ...zap.Field), format string, args ...any) {
	if b.l != nil {
		level(string(bytes.TrimSpace(fmt.Appendf(nil, format, args...))))
	}
}

func (b badgerLogger) Errorf(f string, a ...any)   { b.logf(b.l.Error, f, a...) }
func (b badgerLogger) Warningf(f string, a ...any) { b.logf(b.l.Warn, f, a...) }
func (b badgerLogger) Infof(f string, a ...any)    { b.logf(b.l.Debug, f, a...) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.logf(b.l.Debug, f, a...) }
