package pgstore

import (
	"container/list"
	"sync"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A cache of finished tasks' records, so that reading a finished task again
// (polling it, tasks/result) costs no round trip to the database. It is
// safe because a finished record never changes (Update and Acquire refuse a
// terminal task) until the sweep deletes it, which happens only once its ttl
// has ended, or an operator does (DeleteFinished drops its entry here; a
// replica that did not delete it may serve it until the margin below):
//
//   - only terminal records enter, read by Get or written by an update or a
//     create of this process;
//   - an entry is served only until finishedCacheMargin before its task's
//     ttl ends, so that a replica whose clock runs that much ahead may
//     sweep it; a sweep of this process (which may run with a later time,
//     as tests do) drops the entries it may have deleted;
//   - an entry is served only to the owner of its record; any other caller
//     reads the database, as without the cache.
//
// It is bounded by the records' bytes and drops the least recently used.
// The runtime's cache of tasks/get answers
// sits in front of it and holds fewer, rendered answers; this one also
// serves tasks/result and the answers that cache dropped.

const (
	// finishedCacheBytes bounds the records kept (decoded, about twice
	// their encoded size in memory).
	finishedCacheBytes = 8 << 20
	// maxFinishedEntry is the largest record kept.
	maxFinishedEntry = 64 << 10
	// finishedCacheMargin stops serving an entry this long before its
	// task's ttl ends.
	finishedCacheMargin = 5 * time.Second
)

// finishedCache is the cache; its zero value is ready for use.
type finishedCache struct {
	mu      sync.Mutex
	entries map[string]*list.Element // of *finishedEntry, by task id
	order   list.List                // front: the most recently used
	bytes   int
}

type finishedEntry struct {
	t    *task.Task
	size int
}

// get returns a copy of the owner's finished task id, if kept and not near
// the end of its ttl at now.
func (c *finishedCache) get(owner, id string, now time.Time) *task.Task {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[id]
	if !ok {
		return nil
	}
	e := el.Value.(*finishedEntry)
	if !now.Add(finishedCacheMargin).Before(e.t.ExpiresAt()) {
		c.remove(el)
		return nil
	}
	if e.t.Owner != owner {
		return nil
	}
	c.order.MoveToFront(el)
	return e.t.Clone()
}

// put keeps a copy of t, a record of size bytes, if it is terminal and not
// near the end of its ttl at now.
func (c *finishedCache) put(t *task.Task, size int, now time.Time) {
	if !t.Status.Terminal() || size > maxFinishedEntry || !now.Add(finishedCacheMargin).Before(t.ExpiresAt()) {
		return
	}
	t = t.Clone()
	t.Lease = task.Lease{}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*list.Element{}
	}
	if el, ok := c.entries[t.ID]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.entries[t.ID] = c.order.PushFront(&finishedEntry{t: t, size: size})
	c.bytes += size
	for c.bytes > finishedCacheBytes {
		c.remove(c.order.Back())
	}
}

// sweptUntil drops the entries of tasks whose ttl ends by now: a sweep at
// now may have deleted them.
func (c *finishedCache) sweptUntil(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*finishedEntry); !now.Add(finishedCacheMargin).Before(e.t.ExpiresAt()) {
			c.remove(el)
		}
		el = next
	}
}

// forget drops the entry of task id, if kept: an operator deleted it.
func (c *finishedCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[id]; ok {
		c.remove(el)
	}
}

func (c *finishedCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*finishedEntry)
	delete(c.entries, e.t.ID)
	c.bytes -= e.size
}
