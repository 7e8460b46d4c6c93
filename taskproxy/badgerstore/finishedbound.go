package badgerstore

import (
	"time"

	"github.com/dgraph-io/badger/v4"
)

// The bound on an owner's finished tasks (task.Limits.MaxFinished, 100000
// by default) was checked on every create by walking the owner's
// finished-index keys, up to the bound: once an owner kept a few thousand
// finished tasks, that walk was most of Caddy's CPU per task (70 % of the
// bench's lifecycle profile, growing with the store). The committer now
// keeps, per owner, a ceiling of that count: the count of the last walk
// plus every finished-index key written since. Finished-index keys are
// written only through the committer, and otherwise only leave (expiry,
// the sweep), so the ceiling never falls below the true count. While it is
// under the bound a create cannot exceed the bound and needs no walk; once
// it reaches the bound the walk runs, as before, decides, and its count
// becomes the ceiling. The bound stays exact; an owner near it pays the
// walk as before.
//
// A walk counts at its create's time, and a create still queued may carry
// an earlier time, at which keys expired since still count: the ceiling
// adds the keys that expired within finishedSlack of the walk. Only the
// committer goroutine touches the ceilings; a batch that fails or runs
// again only leaves them higher than the truth, which costs a walk.

// finishedSlack is how much earlier than a walk's time another create of
// the batches that follow it may be stamped.
const finishedSlack = time.Minute

// maxFinishedCeilings bounds the owners whose ceiling is kept; past it
// they are all forgotten, and each one's next create walks once.
const maxFinishedCeilings = 1 << 16

// finishedCeilings holds the ceilings, by quota (Task.Quota: the owner
// unless the task has a QuotaKey); a missing quota walks.
type finishedCeilings map[string]int

// needsWalk reports whether a create of owner's must count its finished
// tasks to know whether it stays under limit.
func (c finishedCeilings) needsWalk(owner string, limit int) bool {
	n, ok := c[owner]
	return !ok || n >= limit
}

// added records that a finished-index key of owner was written.
func (c finishedCeilings) added(owner string) {
	if n, ok := c[owner]; ok {
		c[owner] = n + 1
	}
}

// walk counts like countFinished (deleting expired keys, up
// to maxStaleDeletes), returns the count at now up to upTo, and records the
// ceiling: that count plus the keys that expired within finishedSlack.
func (c *finishedCeilings) walk(txn *badger.Txn, owner string, now time.Time, upTo int) (int, error) {
	n, err := countFinished(txn, owner, now, upTo)
	if err != nil {
		return 0, err
	}
	recent := 0
	prefix := finishedPrefix(owner)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	from, to := finishedFrom(prefix, now.Add(-finishedSlack)), finishedFrom(prefix, now)
	for it.Seek(from); it.ValidForPrefix(prefix) && string(it.Item().Key()) < string(to); it.Next() {
		recent++
	}
	it.Close()
	if *c == nil || len(*c) >= maxFinishedCeilings {
		*c = finishedCeilings{}
	}
	(*c)[owner] = n + recent
	return n, nil
}
