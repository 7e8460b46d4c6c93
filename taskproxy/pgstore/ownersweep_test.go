package pgstore_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// quotaHash is the owners table's key of a quota (an owner, or a quota
// key).
func quotaHash(quota string) []byte {
	sum := sha256.Sum256([]byte(quota))
	return sum[:16]
}

// ownerRows counts the owners table's rows of quotas.
func ownerRows(t *testing.T, schema string, quotas ...string) int {
	t.Helper()
	hashes := make([][]byte, len(quotas))
	for i, q := range quotas {
		hashes[i] = quotaHash(q)
	}
	var n int
	if err := admin.QueryRow(context.Background(), "SELECT count(*) FROM "+pgx.Identifier{schema}.Sanitize()+
		".owners WHERE owner_hash = ANY($1::bytea[])", hashes).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The sweep deletes the owners table's rows of quotas whose tasks are all
// gone (a principal's, an anonymous client address's), batch by batch,
// and keeps those of quotas that still have a task, working or finished.
func TestSweepDeletesOwnersOfNoTask(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema)
	now := time.Now().UTC()
	mk := func(owner, quota string, status task.Status, ttl time.Duration) {
		x := tk(owner)
		x.QuotaKey, x.Status, x.TTL = quota, status, ttl
		if err := s.CreateWithinLimits(ctx, x, task.Limits{MaxActive: 10, MaxFinished: 10}); err != nil {
			t.Fatal(err)
		}
	}
	var gone []string
	for i := range 7 { // more than a batch of 3
		owner := fmt.Sprint("ended-", i)
		mk(owner, "", task.StatusCompleted, time.Minute)
		gone = append(gone, owner)
	}
	mk(task.Anonymous, "ip:192.0.2.1", task.StatusFailed, time.Minute)
	gone = append(gone, "ip:192.0.2.1")
	mk("working", "", task.StatusWorking, time.Hour)
	mk("finished", "", task.StatusCompleted, time.Hour)
	mk(task.Anonymous, "ip:192.0.2.2", task.StatusWorking, time.Hour)
	kept := []string{"working", "finished", "ip:192.0.2.2"}
	if n := ownerRows(t, schema, append(gone, kept...)...); n != len(gone)+len(kept) {
		t.Fatalf("%d owners rows after the creates, want %d", n, len(gone)+len(kept))
	}

	if _, err := s.Sweep(ctx, now.Add(10*time.Minute), 3); err != nil {
		t.Fatal(err)
	}
	if n := ownerRows(t, schema, gone...); n != 0 {
		t.Errorf("%d owners rows left of quotas whose tasks were swept, want none", n)
	}
	if n := ownerRows(t, schema, kept...); n != len(kept) {
		t.Errorf("%d owners rows of quotas with tasks, want %d", n, len(kept))
	}
	// A quota whose row went creates again, within its bound.
	mk("ended-0", "", task.StatusWorking, time.Hour)
	if n := ownerRows(t, schema, "ended-0"); n != 1 {
		t.Errorf("%d owners rows after a create of a swept quota, want 1", n)
	}
}

// Creates racing the sweep of their quota's row never exceed the quota's
// bound: of concurrent creates with MaxActive 1 on a quota whose row is
// there with no task (the sweep may delete it meanwhile) or was swept
// already, exactly one is stored, round after round, while another store
// sweeps without a pause.
func TestSweepOfOwnersKeepsConcurrentCreatesBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s, sweeper := open(t, schema), open(t, schema)
	quoted := pgx.Identifier{schema}.Sanitize()

	stop := make(chan struct{})
	var sweeps sync.WaitGroup
	sweeps.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := sweeper.Sweep(ctx, time.Now(), 2); err != nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() {
		close(stop)
		sweeps.Wait()
	}()

	const rounds, creates = 20, 4
	for r := range rounds {
		quota := fmt.Sprint("ip:198.51.100.", r)
		// The row a quota keeps after its tasks ended.
		if _, err := admin.Exec(ctx, "INSERT INTO "+quoted+".owners (owner_hash) VALUES ($1)", quotaHash(quota)); err != nil {
			t.Fatal(err)
		}
		if r%2 == 0 { // every other round, the creates find the row gone
			waitUntil(t, fmt.Sprintf("round %d: the sweep of the row of %s, which has no task", r, quota), 5*time.Millisecond,
				func() bool { return ownerRows(t, schema, quota) == 0 })
		}
		var stored, refused int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range creates {
			wg.Go(func() {
				x := tk(task.Anonymous)
				x.QuotaKey = quota
				err := s.CreateWithinLimits(ctx, x, task.Limits{MaxActive: 1})
				var q *task.QuotaError
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					stored++
				case errors.As(err, &q):
					refused++
				default:
					t.Errorf("create of %s: %v", quota, err)
				}
			})
		}
		wg.Wait()
		var active int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+quoted+".tasks WHERE quota_hash = $1", quotaHash(quota)).Scan(&active); err != nil {
			t.Fatal(err)
		}
		if stored != 1 || refused != creates-1 || active != 1 {
			t.Fatalf("round %d: %d creates stored, %d refused, %d tasks of the quota; want 1, %d, 1", r, stored, refused, active, creates-1)
		}
	}
}
