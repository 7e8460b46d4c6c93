package pgstore

import (
	"bytes"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
)

// The ceiling of an owner's finished tasks. The bound on them
// (task.Limits.MaxFinished, 100,000 by default) was checked by counting the
// owner's finished tasks up to the bound on every create: with thousands
// kept, that count (a few milliseconds per 10,000, under the owner's lock)
// was what a create of that owner waited for. As in the Badger store
// (its finishedCeilings), the owner's row keeps a ceiling of that count
// instead, which a group reads as it locks the row:
//
//   - finished_ceiling is at least the number of the owner's tasks, active
//     or finished, whose ttl has not ended at any time from ceiling_from on:
//     a count (active tasks, and finished ones kept at ceiling_from), plus
//     every task inserted since. Tasks only leave (expiry, the sweep) or
//     change status between active and finished without adding any, so
//     nothing but an insert makes it grow, and only inserts add to it.
//   - While ceiling + the group's creates of the owner stays under the
//     bound, no create of the group can reach it, and nothing is counted.
//     Otherwise the group counts as before, and the count is the new
//     ceiling. The bound stays exact; an owner near it pays the count, as
//     every create of every owner did before.
//   - ceiling_xid names the transaction that wrote the ceiling, and a
//     group trusts it only while the row's xmin is that transaction: any
//     other write of the row (the quota lock of an older build, or of a
//     single create here, which add tasks without adding to the ceiling)
//     leaves another xmin, and the ceiling is dropped and counted again.
//     So replicas of an older build running beside this one during a
//     rolling upgrade never make it too low. An older build that creates
//     with no bound at all does not lock the owner's row, so its creates
//     are not seen until the next count: the README says so.
//
// No replica has to decrement it, so the sweep of an older build, which
// knows nothing of it, cannot make it wrong, and no reconciliation is
// needed: it is only ever too high, which costs a count.

// ownerBounds is what a group needs to know of one owner of its creates:
// of one quota (Task.Quota), which is the owner unless the tasks have a
// QuotaKey.
type ownerBounds struct {
	hash []byte
	// maxActive and maxFinished are the greatest bounds of the owner's
	// creates in the group, minFinished the least non-zero one; since is
	// the earliest creation time among them, at which finished tasks are
	// counted; creates is how many of the group's creates are the owner's.
	maxActive, maxFinished, minFinished int
	since                               int64
	creates                             int
	// ceiling, from ceilingFrom on, when known (read as the row is locked).
	ceiling, ceilingFrom int64
	known                bool
	// walked is set when the group counted the owner's finished tasks, and
	// exact when that count (finished plus active) is under its limits.
	walked, exact bool
	// active and finished are the counts (finished: the count at since, or
	// the ceiling); the group's creates accepted so far add to active, or
	// to added (the expiries of the finished tasks the group adds).
	active, finished int
	added            []int64
	// accepted is how many of the owner's creates the group inserts.
	accepted int
}

// addedAt is how many of the finished tasks the group added are still
// kept at now.
func (o *ownerBounds) addedAt(now int64) int {
	n := 0
	for _, exp := range o.added {
		if exp > now {
			n++
		}
	}
	return n
}

// needsWalk reports whether the group must count the owner's finished tasks:
// a create of it has that bound, and the ceiling cannot show that the group
// stays under it.
func (o *ownerBounds) needsWalk() bool {
	return o.maxFinished > 0 && (!o.known || o.ceilingFrom > o.since || o.ceiling+int64(o.creates) >= int64(o.minFinished))
}

// groupOwners returns the owners of group's creates, in the order of their
// hashes (the order their rows are locked in).
func groupOwners(group []*createOp) []*ownerBounds {
	var owners []*ownerBounds
	for _, op := range group {
		o := findOwner(owners, op.quota)
		if o == nil {
			o = &ownerBounds{hash: op.quota, since: op.t.CreatedAt.UnixNano()}
			owners = append(owners, o)
		}
		o.creates++
		o.maxActive = max(o.maxActive, op.maxActive)
		o.maxFinished = max(o.maxFinished, op.maxFinished)
		if op.maxFinished > 0 && (o.minFinished == 0 || op.maxFinished < o.minFinished) {
			o.minFinished = op.maxFinished
		}
		o.since = min(o.since, op.t.CreatedAt.UnixNano())
	}
	slices.SortFunc(owners, func(a, b *ownerBounds) int { return bytes.Compare(a.hash, b.hash) })
	return owners
}

func findOwner(owners []*ownerBounds, hash []byte) *ownerBounds {
	for _, o := range owners {
		if bytes.Equal(o.hash, hash) {
			return o
		}
	}
	return nil
}

// count reads, in one statement, each owner's active tasks (up to its
// greatest active bound, and for a walk up to its finished bound too) and,
// where the ceiling does not do, its finished tasks at since; owners that
// need neither are not asked about.
func (g *createGroups) count(ctx context.Context, tx groupConn, owners []*ownerBounds) error {
	var hashes [][]byte
	var activeUpTo, finishedUpTo, since []int64
	var asked []*ownerBounds
	for _, o := range owners {
		walk := o.needsWalk()
		if !walk {
			o.finished = int(o.ceiling) // not read when no create has the bound
		}
		if !walk && o.maxActive <= 0 {
			continue
		}
		a, f := int64(o.maxActive), int64(0)
		if walk {
			a, f = max(a, int64(o.maxFinished)), int64(o.maxFinished)
			o.walked = true
		}
		hashes, activeUpTo, finishedUpTo, since = append(hashes, o.hash), append(activeUpTo, a), append(finishedUpTo, f), append(since, o.since)
		asked = append(asked, o)
	}
	if len(asked) == 0 {
		return nil
	}
	for _, o := range asked {
		if o.walked {
			g.walks.Add(1)
		}
	}
	rows, err := tx.Query(ctx, g.q.countOwners, hashes, activeUpTo, finishedUpTo, since)
	if err != nil {
		return err
	}
	i := 0
	var active, finished int
	_, err = pgx.ForEachRow(rows, []any{&active, &finished}, func() error {
		o := asked[i]
		i++
		o.active = active
		if o.walked {
			o.finished = finished
			o.exact = active < int(activeUpTo[i-1]) && finished < o.maxFinished
		}
		return nil
	})
	return err
}

// ceilingArgs are the arguments of setCeilings for the owners whose new
// ceiling the group knows: a ceiling it read plus what it inserts, or an
// exact count plus that; false when there is none. The others' ceilings
// are dropped by the write of their row (its xmin moved).
func ceilingArgs(owners []*ownerBounds) ([]any, bool) {
	var hashes [][]byte
	var ceilings, froms []int64
	for _, o := range owners {
		switch {
		case o.walked && o.exact:
			hashes, ceilings, froms = append(hashes, o.hash), append(ceilings, int64(o.active+o.finished+o.accepted)), append(froms, o.since)
		case !o.walked && o.known && o.ceilingFrom <= o.since:
			hashes, ceilings, froms = append(hashes, o.hash), append(ceilings, o.ceiling+int64(o.accepted)), append(froms, o.ceilingFrom)
		}
	}
	return []any{hashes, ceilings, froms}, len(hashes) > 0
}
