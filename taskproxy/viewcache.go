package taskproxy

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// A cache of the tasks/get answers of finished tasks, so that polling a
// finished task reads neither the store nor encodes the answer again. It is
// safe because a terminal record never changes (Store.Update and Acquire
// refuse it with ErrTerminal) until it is deleted at the end of its ttl:
//
//   - only terminal records enter the cache, so no status change can leave a
//     stale view behind: the one change left to a finished task is its
//     deletion, and that comes only after its ExpiresAt;
//   - an entry is served only before the task's ExpiresAt; from then on the
//     store answers, with the record or, once swept, ErrExpired;
//   - an entry is served only to the owner of the record; any other caller
//     goes to the store, which answers as for an unknown task and audits the
//     denial, exactly as without the cache.
//
// It is bounded by bytes and evicts the least recently used entry.

const (
	// viewCacheBytes bounds the memory of one runtime's cache.
	viewCacheBytes = 4 << 20
	// maxCachedEntry is the largest entry cached: a task with a larger
	// result is always read from the store.
	maxCachedEntry = 16 << 10
	// viewEntryOverhead approximates an entry's memory beyond its bytes.
	viewEntryOverhead = 320
)

// viewWire names the rendering of a cached view.
type viewWire uint8

const (
	wireLegacy viewWire = iota // 2025-11-25 tasks/get: the Task object
	wireModern                 // 2026-07-28 tasks/get: the DetailedTask
	numWires
)

// viewCache is the cache; its zero value is ready for use.
type viewCache struct {
	mu      sync.Mutex
	entries map[string]*viewEntry
	lru     viewEntry // sentinel of the recency ring: lru.next is the newest
	bytes   int
	max     int // 0 means viewCacheBytes
}

type viewEntry struct {
	task       *Task // a slim copy of the terminal record
	views      [numWires][]byte
	size       int
	prev, next *viewEntry
}

// slimTask copies what the views and the audit read of a terminal record,
// leaving the arguments, routing and input history out.
func slimTask(t *Task) *Task {
	s := &Task{
		ID: t.ID, Owner: t.Owner, Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, TTL: t.TTL, PollInterval: t.PollInterval,
		Era: t.Era, Tool: t.Tool, Result: t.Result, IsError: t.IsError,
	}
	if t.Error != nil {
		e := *t.Error
		s.Error = &e
	}
	return s
}

func entrySize(t *Task) int {
	n := viewEntryOverhead + len(t.ID) + len(t.Owner) + len(t.Tool) + len(t.StatusMessage) + len(t.Result)
	if t.Error != nil {
		n += len(t.Error.Message) + len(t.Error.Data)
	}
	return n
}

// lookup returns the cached record of the owner's task id, and its view on
// wire when it has been rendered, unless the task is unknown here, belongs
// to another owner, or has reached the end of its ttl at now.
func (vc *viewCache) lookup(owner, id string, wire viewWire, now time.Time) (*Task, []byte, bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	e, ok := vc.entries[id]
	if !ok {
		return nil, nil, false
	}
	if !now.Before(e.task.ExpiresAt()) {
		vc.remove(e)
		return nil, nil, false
	}
	if e.task.Owner != owner {
		return nil, nil, false
	}
	vc.touch(e)
	return e.task, e.views[wire], true
}

// remember caches the terminal record t, its views to be rendered when
// first asked for.
func (vc *viewCache) remember(t *Task, now time.Time) { vc.put(t, wireLegacy, nil, now) }

// put caches the terminal record t and, when not nil, its view on wire.
// Records that are not terminal, have expired at now, or are too large are
// not cached.
func (vc *viewCache) put(t *Task, wire viewWire, view []byte, now time.Time) {
	if !t.Status.Terminal() || !now.Before(t.ExpiresAt()) {
		return
	}
	size := entrySize(t) + len(view)
	if size > maxCachedEntry {
		return
	}
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.entries == nil {
		vc.entries = map[string]*viewEntry{}
		vc.lru.prev, vc.lru.next = &vc.lru, &vc.lru
	}
	e, ok := vc.entries[t.ID]
	switch {
	case !ok:
		e = &viewEntry{task: slimTask(t), size: entrySize(t)}
		vc.entries[t.ID] = e
		vc.bytes += e.size
		vc.link(e)
	case e.task.Owner != t.Owner: // ids are never reused; never mix owners
		return
	default:
		vc.touch(e)
	}
	if view != nil && e.views[wire] == nil && e.size+len(view) <= maxCachedEntry {
		e.views[wire] = view
		e.size += len(view)
		vc.bytes += len(view)
	}
	limit := vc.max
	if limit <= 0 {
		limit = viewCacheBytes
	}
	for vc.bytes > limit && vc.lru.prev != e {
		vc.remove(vc.lru.prev)
	}
}

func (vc *viewCache) link(e *viewEntry) {
	e.prev, e.next = &vc.lru, vc.lru.next
	e.prev.next, e.next.prev = e, e
}

func (vc *viewCache) touch(e *viewEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	vc.link(e)
}

func (vc *viewCache) remove(e *viewEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	delete(vc.entries, e.task.ID)
	vc.bytes -= e.size
}

// renderView encodes the tasks/get result of t on wire.
func renderView(t *Task, wire viewWire) ([]byte, error) {
	if wire == wireModern {
		return json.Marshal(toModernDetail(t, "complete"))
	}
	return json.Marshal(toLegacyTask(t))
}

// serveCachedGet answers a tasks/get of a finished task from the cache, and
// reports whether it did.
func (c *call) serveCachedGet(id string, wire viewWire) bool {
	t, view, ok := c.g.rt.views.lookup(c.owner, id, wire, clock())
	if !ok {
		return false
	}
	if view == nil {
		var err error
		if view, err = renderView(t, wire); err != nil {
			return false // the store path answers, and reports the error
		}
		c.g.rt.views.put(t, wire, view, clock())
	}
	c.g.audit(auditRetrieved, id, t, c.caller)
	c.replyRaw(view)
	return true
}

// replyView answers a tasks/get with the view of t read from the store,
// caching it when t is finished.
func (c *call) replyView(t *Task, wire viewWire) error {
	view, err := renderView(t, wire)
	if err != nil {
		c.fail(c.g.internalError("encoding a result", err))
		return nil
	}
	c.g.rt.views.put(t, wire, view, clock())
	c.replyRaw(view)
	return nil
}

// replyRaw writes a JSON-RPC success response around result, already
// encoded, without encoding it again.
func (c *call) replyRaw(result []byte) {
	writeJSON(c.w, http.StatusOK, responseRaw(c.msg.ID, result))
}

// responseRaw is ResponseBytes(id, result) for an encoded result, built by
// appending. An id that encoding would change (HTML-escaped characters,
// spacing) takes the encoder's path, so the bytes are always the same.
func responseRaw(id json.RawMessage, result []byte) []byte {
	if bytes.ContainsAny(id, "<>& \t\r\n\u2028\u2029") {
		data, err := ResponseBytes(id, json.RawMessage(result))
		if err == nil {
			return data
		}
	}
	id = orNull(id)
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":,"result":}`)+len(id)+len(result))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}
