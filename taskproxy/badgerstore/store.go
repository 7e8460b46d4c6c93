package badgerstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Key layout (the store rules are in package task's doc):
//
//	t/<taskId>                                 the record, with its lease until that is renewed
//	h/<taskId>                                 its header, for a record of 1 KiB or more: what listings show ([handle.readHead])
//	l/<taskId>                                 a renewed lease: renewing it writes only this
//	o/<owner hash>/<createdAt hex>/<taskId>    owner index: listing
//	a/<quota hash>/<taskId>                    active (non-terminal) index: quotas, recovery
//	f/<quota hash>/<expiresAt hex>/<taskId>    finished index: their bound ([handle.readHead])
//	e/<expiresAt hex>/<taskId>                 expiry index: the sweeper
//	i/<owner hash>/<key hash>                  idempotency keys: the task id
//	x/<taskId>                                 tombstone of a swept task: its owner hash
//	s/<session id hash>                        a session binding: its owner hash ([sessions])
//	d/<session id hash>                        its client's description ([sessions.DescribeSession])
//	u/<key hash>                               what was learned of an upstream ([learned])
//	m/epoch                                    how many times the store was opened
//	m/cursor-secret                            the key that signs listing cursors
//	m/format                                   the format version ([checkFormat])
//
// Owners are hashed so that keys have a fixed shape whatever the principal
// looks like. The active and finished indexes count a task under the hash
// of its quota (Task.Quota), which is its owner's hash unless the task has
// a QuotaKey: records written before quota keys are indexed as they
// always were. The sweeper deletes a task and its index keys together; only
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
	// ([diskGuard]). 0 means DefaultMinFreeBytes; negative checks only
	// that the filesystem takes writes.
	MinFreeBytes int64
}

// DefaultGCInterval is how often an on-disk store runs value-log garbage
// collection unless configured.
const DefaultGCInterval = 10 * time.Minute

// Store is the Store on an embedded Badger database. It puts together the
// seams below, each a small type with the state it needs, and holds the
// state they share (the handle, the opening, the committer), which they
// point to; their methods are the Store's through embedding.
type Store struct {
	handle      // the database, the disk guard and the closed gate
	opening     // this opening's epoch and lease holder
	committer   // the group commit and its cache of live records ([committer.readLive])
	writer      // creates, updates and leases, as the committer's writes ([committer], [opening])
	reader      // an owner's reads: Get, List, CountActive
	storeLister // every owner's tasks: the admin API's and recovery's listings
	sessions    // session bindings
	learned     // what was learned of upstreams
	sweeper     // expiry and value-log garbage collection
}

// handle is the database with what every call goes through: the gate that
// keeps Close out while a call runs, and the disk guard before a write.
type handle struct {
	db *badger.DB
	// guard checks the filesystem before writes ([diskGuard]); nil in
	// memory.
	guard *diskGuard

	mu     sync.RWMutex // guards closed against the methods in flight
	closed bool

	// onRecordRead, when set (by tests, before the store is used), is
	// called each time a record's value is read.
	onRecordRead func(id string)
}

var (
	_ task.Store         = (*Store)(nil)
	_ task.SummaryReader = (*Store)(nil)
)

// Open opens (creating if needed) a store with options sized for a
// small gateway rather than Badger's defaults, which reserve hundreds of MiB.
func Open(o Options) (*Store, error) {
	opts := badgerOptions(o)
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
	s := &Store{handle: handle{db: db}}
	h, open := &s.handle, &s.opening
	if !o.InMemory {
		if h.guard, err = newDiskGuard(o.Dir, o.MinFreeBytes); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if err := checkFormat(db); err != nil {
		h.guard.close()
		_ = db.Close()
		return nil, err
	}
	if err := open.nextEpoch(db); err != nil {
		h.guard.close()
		_ = db.Close()
		return nil, err
	}
	cursors := &cursorSigner{}
	if err := cursors.loadCursorSecret(db); err != nil {
		h.guard.close()
		_ = db.Close()
		return nil, err
	}
	s.committer = committer{handle: h, opening: open, writes: make(chan writeOp, maxBatch), committerDone: make(chan struct{})}
	s.writer = writer{committer: &s.committer, maxRecord: maxRecord}
	s.reader = reader{handle: h, opening: open, cursorSigner: cursors}
	s.storeLister = storeLister{reader: &s.reader}
	s.sessions = sessions{handle: h}
	s.learned = learned{handle: h}
	s.sweeper = sweeper{committer: &s.committer, gcStop: make(chan struct{}), gcDone: make(chan struct{})}
	go s.commitWrites()
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

// badgerOptions are the Badger options of a store: sized for a small
// gateway rather than Badger's defaults, which reserve hundreds of MiB.
func badgerOptions(o Options) badger.Options {
	return badger.DefaultOptions(o.Dir).
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
func (s *handle) use(fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return task.ErrClosed
	}
	return fn()
}

func recordKey(id string) []byte { return idKey("t/", id) }

// idKey is prefix and id, in one allocation.
func idKey(prefix, id string) []byte {
	return append(append(make([]byte, 0, len(prefix)+len(id)), prefix...), id...)
}

// ownerHashLen is the length of an ownerHash.
const ownerHashLen = 32

func ownerHash(owner string) string {
	return string(appendOwnerHash(make([]byte, 0, ownerHashLen), owner))
}

// appendOwnerHash appends ownerHash(owner) to b.
func appendOwnerHash(b []byte, owner string) []byte {
	sum := sha256.Sum256([]byte(owner))
	return hex.AppendEncode(b, sum[:16])
}

// ownedPrefix is kind, "/", the owner's hash and "/", in a slice with room
// for extra bytes more: a key of an owner's index is made in one
// allocation.
func ownedPrefix(kind byte, owner string, extra int) []byte {
	b := make([]byte, 0, 2+ownerHashLen+1+extra)
	b = appendOwnerHash(append(b, kind, '/'), owner)
	return append(b, '/')
}

// stampLen is the length of appendStamp's part of a key.
const stampLen = 17

// appendStamp appends nanos as 16 hex digits (fmt's %016x), a slash and
// id: index keys sort by the time, then the id.
func appendStamp(b []byte, nanos int64, id string) []byte {
	if nanos < 0 { // before 1970: %016x writes a sign; not met in practice
		return fmt.Appendf(b, "%016x/%s", nanos, id)
	}
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], uint64(nanos))
	return append(append(hex.AppendEncode(b, be[:]), '/'), id...)
}

func ownerPrefix(owner string) []byte { return ownedPrefix('o', owner, 0) }

func ownerKey(t *task.Task) []byte {
	return appendStamp(ownedPrefix('o', t.Owner, stampLen+len(t.ID)), t.CreatedAt.UnixNano(), t.ID)
}

// activePrefix is the active index of quota (Task.Quota).
func activePrefix(quota string) []byte { return ownedPrefix('a', quota, 0) }

func activeKey(t *task.Task) []byte {
	return append(ownedPrefix('a', t.Quota(), len(t.ID)), t.ID...)
}

func expiryKey(t *task.Task) []byte {
	return appendStamp(append(make([]byte, 0, 2+stampLen+len(t.ID)), "e/"...), t.ExpiresAt().UnixNano(), t.ID)
}

func leaseKey(id string) []byte { return idKey("l/", id) }

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
func (s *writer) encodeRecord(t *task.Task, withLease bool) ([]byte, error) {
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
func (s *handle) getRecord(txn *badger.Txn, id string) (*task.Task, error) {
	t, _, err := s.readRecord(txn, id, "")
	return t, err
}

// holderPrefix is what every lease holder of this opening of the store
// starts with (see nextEpoch).
func (s *opening) holderPrefix() string {
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
func (s *handle) readRecord(txn *badger.Txn, id, current string) (*task.Task, bool, error) {
	item, err := txn.Get(recordKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, task.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading task %s: %w", id, err)
	}
	t, err := s.decodeItem(item, id)
	if err != nil {
		return nil, false, err
	}
	inRecord, err := resolveLease(txn, t, current)
	return t, inRecord, err
}

// decodeItem decodes the record of task id (onRecordRead counts it).
func (s *handle) decodeItem(item *badger.Item, id string) (*task.Task, error) {
	if s.onRecordRead != nil {
		s.onRecordRead(id)
	}
	var t task.Task
	if err := item.Value(func(v []byte) error { return task.DecodeRecord(v, &t) }); err != nil {
		return nil, fmt.Errorf("decoding task %s: %w", id, err)
	}
	return &t, nil
}

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
func (s *handle) retryConflicts(ctx context.Context, what string, fn func(*badger.Txn) error) error {
	for range maxConflictRetries {
		if err := s.guard.check(); err != nil {
			return err
		}
		err := s.db.Update(fn)
		if err == nil {
			return s.confirmWritten()
		}
		if !errors.Is(err, badger.ErrConflict) {
			return s.classifyWriteError(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%s: gave up after %d conflicts", what, maxConflictRetries)
}

// confirmWritten reports whether a write Badger took reached the disk as
// far as the store can tell: when the filesystem turned read-only while
// the write was in flight (ext4 after an error), Linux answers the sync of
// a read-only filesystem with success without writing, and Badger writes
// through mappings made before, so the write may live in memory only. It
// is then reported as the guard's ErrReadOnly (task.ErrUnavailable): the
// caller is told to retry, and never acknowledges a task the disk may not
// hold. A write that did reach the disk is found again after a restart,
// as a task whose caller was told it failed (orphans are ended or re-run).
func (s *handle) confirmWritten() error {
	if err := s.guard.writable(); err != nil {
		return fmt.Errorf("%w (after a write, which may not have reached the disk)", err)
	}
	return nil
}

// classifyWriteError returns err, or, when the filesystem stopped taking
// writes between the guard's check and the write (a disk filling up or
// turned read-only under a running store), the guard's ErrDiskFull or
// ErrReadOnly (task.ErrUnavailable) wrapping it: the caller then answers
// "unavailable, retry later" as for a write the guard refused, not an
// internal error.
func (s *handle) classifyWriteError(err error) error {
	if err == nil || errors.Is(err, task.ErrUnavailable) {
		return err
	}
	if gerr := s.guard.check(); gerr != nil {
		return fmt.Errorf("%w (the write failed: %w)", gerr, err)
	}
	return err
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
