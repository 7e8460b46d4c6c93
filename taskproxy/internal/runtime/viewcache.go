package runtime

import (
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A cache of the tasks/get answers of finished tasks, so that polling a
// finished task reads neither the store nor encodes the answer again. It is
// safe because a terminal record never changes (Store.Update and Acquire
// refuse it with ErrTerminal) until it is deleted at the end of its ttl:
//
//   - only terminal records enter the cache, so no status change can leave a
//     stale view behind: the one change left to a finished task is its
//     deletion, and that comes only after its ExpiresAt, or when an
//     operator deletes it (DeleteAsOperator drops its entry; another
//     replica may serve its own entry until the margin below);
//   - an entry is served only until shortly before the task's ExpiresAt
//     (ViewExpiryMargin); from then on the store answers, with the record
//     or, once swept, ErrExpired;
//   - an entry is served only to the owner of the record; any other caller
//     goes to the store, which answers as for an unknown task and audits the
//     denial, exactly as without the cache.
//
// It is bounded by bytes and evicts as least recently used does, with a
// second chance in place of moving every hit to the front of the list: a
// hit marks its entry used, and eviction, going from the oldest, spares
// a used entry once (clearing its mark and moving it to the front). A hit
// so writes nothing but its own entry, where moving it would write its
// two neighbours, which with thousands of tasks polled at random are
// lines the processor has not cached.

const (
	// viewCacheBytes bounds the memory of one runtime's cache.
	viewCacheBytes = 2 << 20
	// maxCachedEntry is the largest entry cached: a task with a larger
	// result is always read from the store.
	maxCachedEntry = 16 << 10
	// ViewExpiryMargin stops serving an entry this long before its task's
	// ttl ends: another replica sharing the store may sweep the task by a
	// clock running a little ahead of this one.
	ViewExpiryMargin = 5 * time.Second
	// viewEntryOverhead approximates an entry's memory beyond its bytes
	// (measured: the entry, its map slot and allocation rounding).
	viewEntryOverhead = 255
	// maxKeyLen is the longest task id the cache keeps: the gateway's ids
	// have 22 bytes.
	maxKeyLen = 31
)

// Wire names the rendering of a cached view.
type Wire uint8

const (
	WireV2025 Wire = iota // 2025-11-25 tasks/get: the Task object
	WireV2026             // 2026-07-28 tasks/get: the DetailedTask
	numWires
)

// viewCache is the cache; its zero value is ready for use.
type viewCache struct {
	mu      sync.Mutex
	entries map[viewKey]*viewEntry
	lru     viewEntry // sentinel of the recency ring: lru.next is the newest
	bytes   int
	max     int // 0 means viewCacheBytes
	// render encodes a task's tasks/get result on a wire (the protocol
	// adapters' rendering, injected: the runtime knows no wire format).
	render Renderer
}

// viewKey is a task id as the cache's map holds it: in the map's own
// memory, so a lookup compares it where it found its hash rather than
// reading a string from elsewhere in the heap (with thousands of tasks
// polled at random, a miss of the processor's cache on every hit).
type viewKey struct {
	n  uint8
	id [maxKeyLen]byte
}

// keyOf returns the key of id, and false for an id too long to cache.
func keyOf[T string | []byte](id T) (viewKey, bool) {
	var k viewKey
	if len(id) > maxKeyLen {
		return k, false
	}
	k.n = uint8(len(id)) //nolint:gosec // at most maxKeyLen, checked above
	copy(k.id[:], id)
	return k, true
}

type viewEntry struct {
	// What every hit reads comes first, in the entry's first two cache
	// lines (an entry is allocated in the size class of 192 bytes, whose
	// objects start on a line): with thousands of tasks polled at random, each line a hit
	// reads is a miss to memory. TestViewEntryLayout holds the order.
	expires time.Time
	// owner is the task's owner, interned: the handle keeps the one copy
	// of the name that every entry of the owner shares alive (a name
	// taken out of it, with Value, would be copied anew once no handle
	// held it).
	owner      unique.Handle[string]
	views      [numWires][]byte
	prev, next *viewEntry
	// read is the route whose audit log has recorded the owner's read of
	// the finished task (ReadMark).
	read ReadMark
	// size is the entry's accounted bytes; used is set by a hit and
	// cleared when eviction spares the entry.
	size int32
	used bool

	// What the audit log names.
	id, tool  string
	status    task.Status
	createdAt time.Time
}

// ReadMark remembers the route that audited a read of a cached finished
// task: the owner and the status of the task never change, so that route
// audits its further reads at debug level, and, with debug off, a poll
// need not ask the route's set of first reads (a lock and a map lookup of
// two strings) to learn it. Another route (another site, or the next
// configuration) asks its own set, as before.
type ReadMark struct{ by atomic.Pointer[Route] }

// Audited reports whether route has audited a read of the entry.
func (m *ReadMark) Audited(route *Route) bool { return m != nil && m.by.Load() == route }

// Mark records that route has audited a read of the entry.
func (m *ReadMark) Mark(route *Route) {
	if m != nil {
		m.by.Store(route)
	}
}

// CachedRead is a hit of the cache: its read mark, and the stub of its
// task for the audit log. What it reads of the entry never changes once
// the entry is made.
type CachedRead struct{ e *viewEntry }

// Audited reports whether route has audited a read of the task.
func (h CachedRead) Audited(route *Route) bool { return h.e.read.Audited(route) }

// Mark records that route has audited a read of the task.
func (h CachedRead) Mark(route *Route) { h.e.read.Mark(route) }

// Stub fills t with a stub of the task (id, owner, tool, status,
// creation) for the audit log: the caller's own record, which a polled
// answer need not allocate, filled only when a read is audited.
func (h CachedRead) Stub(t *task.Task) { h.e.fillStub(t) }

// fillStub makes t the record as far as the audit log reads it.
func (e *viewEntry) fillStub(t *task.Task) {
	*t = task.Task{ID: e.id, Owner: e.owner.Value(), Tool: e.tool, Status: e.status, CreatedAt: e.createdAt}
}

// lookup returns the cached entry of the owner's task id with its view on
// wire, unless there is none, the task belongs to another owner, or it has
// reached the end of its ttl at now.
func (vc *viewCache) lookup(owner string, id []byte, wire Wire, now time.Time) (*viewEntry, []byte, bool) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	key, ok := keyOf(id)
	if !ok {
		return nil, nil, false
	}
	e, ok := vc.entries[key]
	if !ok {
		return nil, nil, false
	}
	if !now.Add(ViewExpiryMargin).Before(e.expires) {
		vc.remove(e)
		return nil, nil, false
	}
	if e.owner.Value() != owner || e.views[wire] == nil {
		return nil, nil, false
	}
	if !e.used {
		e.used = true
	}
	return e, e.views[wire], true
}

// remember caches the view of the terminal record t on the wire of its
// era, the one its client most likely reads it on.
func (vc *viewCache) remember(t *task.Task, now time.Time) {
	if !t.Status.Terminal() || !now.Before(t.ExpiresAt()) {
		return
	}
	wire := WireV2025
	if t.Era == task.Era2026 {
		wire = WireV2026
	}
	if view, err := vc.render(t, wire); err == nil {
		vc.put(t, wire, view, now)
	}
}

// put caches view, the rendering of the terminal record t on wire. Records
// that are not terminal, have expired at now, or are too large are not
// cached.
func (vc *viewCache) put(t *task.Task, wire Wire, view []byte, now time.Time) {
	if !t.Status.Terminal() || !now.Before(t.ExpiresAt()) {
		return
	}
	base := viewEntryOverhead + len(t.ID) + len(t.Owner) + len(t.Tool)
	key, ok := keyOf(t.ID)
	if !ok || base+len(view) > maxCachedEntry {
		return
	}
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if vc.entries == nil {
		vc.entries = map[viewKey]*viewEntry{}
		vc.lru.prev, vc.lru.next = &vc.lru, &vc.lru
	}
	e, ok := vc.entries[key]
	switch {
	case !ok:
		// The owner is interned: every hit compares it with the caller's,
		// and one copy per owner stays in the processor's cache where a
		// copy per task (each decoded with its record) is a miss to memory.
		e = &viewEntry{id: t.ID, owner: unique.Make(t.Owner), tool: t.Tool, status: t.Status, createdAt: t.CreatedAt, expires: t.ExpiresAt(),
			size: int32(base)} //nolint:gosec // at most maxCachedEntry, checked above
		vc.entries[key] = e
		vc.bytes += int(e.size)
		vc.link(e)
	case e.owner.Value() != t.Owner: // ids are never reused; never mix owners
		return
	default:
		vc.touch(e)
	}
	if e.views[wire] == nil && int(e.size)+len(view) <= maxCachedEntry {
		e.views[wire] = view
		e.size += int32(len(view)) //nolint:gosec // at most maxCachedEntry, checked above
		vc.bytes += len(view)
	}
	limit := vc.max
	if limit <= 0 {
		limit = viewCacheBytes
	}
	// The entry just put is never evicted; when eviction comes round to
	// it, every other entry has had its second chance.
	for vc.bytes > limit && len(vc.entries) > 1 {
		switch oldest := vc.lru.prev; {
		case oldest == e:
			vc.touch(e)
		case oldest.used:
			oldest.used = false
			vc.touch(oldest)
		default:
			vc.remove(oldest)
		}
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

// forget drops the entry of task id, if cached: an operator deleted it.
func (vc *viewCache) forget(id string) {
	vc.mu.Lock()
	defer vc.mu.Unlock()
	key, ok := keyOf(id)
	if !ok {
		return
	}
	if e, ok := vc.entries[key]; ok {
		vc.remove(e)
	}
}

func (vc *viewCache) remove(e *viewEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	key, _ := keyOf(e.id) // cached, so short enough
	delete(vc.entries, key)
	vc.bytes -= int(e.size)
}

// Renderer encodes the tasks/get result of a finished task on a wire.
type Renderer func(t *task.Task, wire Wire) ([]byte, error)

// CachedView returns the cached tasks/get result of the owner's finished
// task id on wire, with what the audit of the read needs. The id is the
// bytes of the request: a poll answered from the cache makes no string
// of it.
func (rt *Runtime) CachedView(owner string, id []byte, wire Wire, now time.Time) ([]byte, CachedRead, bool) {
	e, view, ok := rt.views.lookup(owner, id, wire, now)
	if !ok {
		return nil, CachedRead{}, false
	}
	return view, CachedRead{e}, true
}

// View renders t's tasks/get result on wire, with the renderer the
// runtime was made with, and keeps it when t is finished.
func (rt *Runtime) View(t *task.Task, wire Wire, now time.Time) ([]byte, error) {
	view, err := rt.views.render(t, wire)
	if err != nil {
		return nil, err
	}
	rt.views.put(t, wire, view, now)
	return view, nil
}
