package badgerstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Headers and the finished index.
//
//	h/<taskId>                                  the task's summary (Task.Summary): owner, status, times
//	f/<quota hash>/<expiresAt hex>/<taskId>     finished (terminal) tasks: their bound per quota (Task.Quota)
//
// A task's header is written with its record, in the same transaction, so
// both keys carry the same version; the owner check of Get and the listings
// read the header, a few hundred bytes, and never the record, which may
// hold megabytes of arguments and result. A header whose version is not
// its record's was left by a build before headers (which rewrote only the
// record): the record is then read whole, as it always was. So stores of
// older builds open and answer as they are, and an older build may still
// open a store this one wrote.
//
// A record smaller than headerMinRecord gets no header: read whole, it
// costs about what its header would (the header is a third to a half of
// it), while a header would be one more key and one more encoding on every
// write of the task, and more for Badger to flush and compact. Reads need
// no change: a task without a header is read as the builds before headers
// wrote it. A record that shrinks below the bound keeps its earlier header
// until it is swept, of an older version, so not believed.
//
// The finished index sorts an owner's finished tasks by expiry, so that a
// count starts at "now" and skips those whose ttl has ended (gone at the
// next sweep, or left behind by an older build's sweep, which knew nothing
// of the index: the count deletes those).

func headerKey(id string) []byte { return idKey("h/", id) }

// finishedPrefix is the finished index of quota (Task.Quota).
func finishedPrefix(quota string) []byte { return ownedPrefix('f', quota, 0) }

func finishedKey(t *task.Task) []byte {
	return appendStamp(ownedPrefix('f', t.Quota(), stampLen+len(t.ID)), t.ExpiresAt().UnixNano(), t.ID)
}

// headerMinRecord is the size of a record from which it gets a header.
const headerMinRecord = 1 << 10

// headerFor is the header to write with t's record of recordLen bytes:
// encodeHeader's, or nil for a record under headerMinRecord.
func headerFor(t *task.Task, withLease bool, recordLen int) ([]byte, error) {
	if recordLen < headerMinRecord {
		return nil, nil
	}
	return encodeHeader(t, withLease)
}

// encodeHeader encodes t's summary, with its lease when withLease is set
// (as the record is: see encodeRecord).
func encodeHeader(t *task.Task, withLease bool) ([]byte, error) {
	h := t.Summary()
	if !withLease {
		h.Lease = task.Lease{}
	}
	data, err := task.EncodeRecord(h)
	if err != nil {
		return nil, fmt.Errorf("encoding the header of task %s: %w", t.ID, err)
	}
	return data, nil
}

// putRecord writes the record and the header of task id in txn. A nil
// header writes none: the record as the builds before headers wrote it
// (tests of those stores).
func putRecord(txn *badger.Txn, id string, record, header []byte) error {
	if err := txn.Set(recordKey(id), record); err != nil || header == nil {
		return err
	}
	return txn.Set(headerKey(id), header)
}

// readHead reads the summary of task id, without its lease resolved: from
// its header when that is the record's, or else from the record, whole
// (whole is then set, and t is the full task).
func (s *handle) readHead(txn *badger.Txn, id string) (t *task.Task, whole bool, err error) {
	rec, err := txn.Get(recordKey(id)) // the key and its version only, not the value
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, task.ErrNotFound
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading task %s: %w", id, err)
	}
	head, err := txn.Get(headerKey(id))
	switch {
	case err == nil && head.Version() == rec.Version():
		var h task.Task
		if err := head.Value(func(v []byte) error { return task.DecodeRecord(v, &h) }); err != nil {
			return nil, false, fmt.Errorf("decoding the header of task %s: %w", id, err)
		}
		return &h, false, nil
	case err != nil && !errors.Is(err, badger.ErrKeyNotFound):
		return nil, false, fmt.Errorf("reading the header of task %s: %w", id, err)
	}
	t, err = s.decodeItem(rec, id)
	return t, true, err
}

// checkOwner checks that task id is owner's, on its header when that is
// the record's: ErrNotFound when there is no such task, ErrForeign when it
// is another owner's. It returns the task when it had to read it from its
// record (without its lease resolved), or else the record's item, its
// value not read.
func (s *handle) checkOwner(txn *badger.Txn, id, owner string) (rec *badger.Item, whole *task.Task, err error) {
	rec, err = txn.Get(recordKey(id)) // the key and its version only, not the value
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, nil, task.ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading task %s: %w", id, err)
	}
	head, err := txn.Get(headerKey(id))
	if err == nil && head.Version() == rec.Version() {
		var mine, known bool
		if err := head.Value(func(v []byte) error { mine, known = headerOwnedBy(v, id, owner); return nil }); err != nil {
			return nil, nil, fmt.Errorf("reading the header of task %s: %w", id, err)
		}
		switch {
		case known && mine:
			return rec, nil, nil
		case known:
			return nil, nil, task.ErrForeign
		}
	}
	t, read, err := s.readHead(txn, id) // a header of an unexpected shape, or none
	switch {
	case err != nil:
		return nil, nil, err
	case t.Owner != owner:
		return nil, nil, task.ErrForeign
	case read:
		return nil, t, nil
	}
	return rec, nil, nil
}

// headerOwnedBy reports whether a header names owner, without decoding
// it: EncodeRecord writes the id and the owner first, as json.Marshal
// would. known is false for a header that does not begin so.
func headerOwnedBy(header []byte, id, owner string) (mine, known bool) {
	qid, err1 := json.Marshal(id)
	qowner, err2 := json.Marshal(owner)
	if err1 != nil || err2 != nil {
		return false, false
	}
	rest, ok := bytes.CutPrefix(header, []byte(`{"id":`))
	if !ok {
		return false, false
	}
	if rest, ok = bytes.CutPrefix(rest, qid); !ok {
		return false, false
	}
	if rest, ok = bytes.CutPrefix(rest, []byte(`,"owner":"`)); !ok {
		return false, false
	}
	rest, ok = bytes.CutPrefix(rest, qowner[1:])
	return ok && len(rest) > 0 && rest[0] == ',', true
}

// readSummary reads the summary of task id, its lease resolved.
func (s *reader) readSummary(txn *badger.Txn, id string) (*task.Task, error) {
	t, _, err := s.readHead(txn, id)
	if err != nil {
		return nil, err
	}
	if _, err := resolveLease(txn, t, s.holderPrefix()); err != nil {
		return nil, err
	}
	return t.Summary(), nil
}

// countFinished counts the finished tasks of quota (Task.Quota) whose ttl
// has not ended at now, up to upTo, reading keys only; it deletes in txn
// the keys of those whose ttl has.
func countFinished(txn *badger.Txn, quota string, now time.Time, upTo int) (int, error) {
	prefix := finishedPrefix(quota)
	from := finishedFrom(prefix, now)
	var stale [][]byte
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	for it.Rewind(); it.ValidForPrefix(prefix) && string(it.Item().Key()) < string(from) && len(stale) < maxStaleDeletes; it.Next() {
		stale = append(stale, it.Item().KeyCopy(nil))
	}
	n := 0
	for it.Seek(from); it.ValidForPrefix(prefix) && n < upTo; it.Next() {
		n++
	}
	it.Close()
	for _, k := range stale {
		if err := txn.Delete(k); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// finishedFrom is the first finished-index key under prefix whose ttl has
// not ended at now.
func finishedFrom(prefix []byte, now time.Time) []byte {
	return fmt.Appendf(slices.Clip(prefix), "%016x", now.UnixNano())
}

// maxStaleDeletes bounds the expired finished-index keys one create
// deletes: the sweeper deletes the rest with their tasks.
const maxStaleDeletes = 64
