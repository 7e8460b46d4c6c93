package badgerstore

import (
	"maps"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The committer's cache of live records. Every write of a task record or
// lease goes through the [committer], the sweep's deletions
// included, so the committer knows the last committed state of every task
// it wrote; an update or a lease renewal of such a task (the worker storing
// its outcome, most often) then starts from that state instead of reading
// and decoding the record and its lease key again, about a third of the
// committer's work per task. Only the committer goroutine touches the cache.
// A batch's writes are staged and reach the cache only once its transaction
// has committed: a batch that fails, or runs again on a conflict, leaves it
// as it was.

// Bounds of the cache: records of live tasks only (a task leaves when it
// ends or is swept), small ones only, and so many at most; a task the cache
// has no room for is read from the store as before.
const (
	maxLiveRecords   = 4096
	maxLiveRecordLen = 8 << 10
)

// liveEntry is the committed state of a live task: the record as decoded,
// and where its lease lives (see encodeRecord). A nil entry in a batch's
// staging marks a task that ended or was deleted.
type liveEntry struct {
	tk            *task.Task
	leaseInRecord bool
}

// readLive returns task id as the batch so far left it, from the staging,
// the cache, or the store. The task is the caller's to change.
func (s *committer) readLive(txn *badger.Txn, id string) (*task.Task, bool, error) {
	e, staged := s.staged[id]
	if !staged {
		e = s.live[id]
	}
	if e != nil {
		return ownCopy(e.tk), e.leaseInRecord, nil
	}
	return s.readRecord(txn, id, s.holderPrefix()) // the transaction holds the batch's own writes
}

// cached reports whether readLive has task id without reading the store.
func (s *committer) cached(id string) bool {
	e, staged := s.staged[id]
	return e != nil || !staged && s.live[id] != nil
}

// stage records what a write of the batch left of task t: its state, with
// size the length of its encoded record (0 when the write did not encode
// it: kept only if the task is cached, so known to be small), or nil t when
// the task ended or was deleted. t is copied.
func (s *committer) stage(id string, t *task.Task, leaseInRecord bool, size int) {
	if s.staged == nil {
		s.staged = map[string]*liveEntry{}
	}
	// Cached means cached as the batch so far left it: a task an earlier
	// write of the batch dropped (too big, say) is not, whatever s.live
	// still says until the batch settles.
	e, staged := s.staged[id]
	cached := e != nil || !staged && s.live[id] != nil
	fits := cached || size > 0 && len(s.live)+len(s.staged) < maxLiveRecords
	if t == nil || t.Status.Terminal() || size > maxLiveRecordLen || !fits {
		s.staged[id] = nil
		return
	}
	s.staged[id] = &liveEntry{tk: ownCopy(t), leaseInRecord: leaseInRecord}
}

// ownCopy copies t for or from the cache, its Headers map included: Clone
// shares the map, and the cache must share nothing with the Tasks its
// callers hold (the one handed to Create, the one Update returns) or with
// the one an update's function edits, as it shared nothing when every
// write read the record back from Badger. Raw JSON values are shared: no
// code edits them in place.
func ownCopy(t *task.Task) *task.Task {
	c := t.Clone()
	c.Headers = maps.Clone(t.Headers)
	return c
}

// settle applies a batch's staging to the cache once its transaction has
// committed. When it failed, the tasks it touched leave the cache too, to
// be read from the store again: what the store holds of them is its word.
func (s *committer) settle(committed bool) {
	if s.live == nil {
		s.live = map[string]*liveEntry{}
	}
	for id, e := range s.staged {
		if e == nil || !committed {
			delete(s.live, id)
		} else {
			s.live[id] = e
		}
	}
	clear(s.staged)
}
