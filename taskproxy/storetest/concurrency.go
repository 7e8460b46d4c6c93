package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

var longAgo = time.Unix(1_000_000_000, 0)

// Everything at once, as a busy gateway does it: creates within a quota,
// updates, lease renewals, reads, listings and sweeps across owners. Under
// -race this finds data races in the backend; the end state must add up.
func testMixedConcurrency(t *testing.T, s task.Store) {
	ctx := context.Background()
	const owners, perOwner, quota = 4, 12, 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	created := map[string][]string{}
	for o := range owners {
		owner := fmt.Sprintf("owner-%d", o)
		wg.Go(func() {
			for i := range perOwner {
				tk := newTask(owner, time.Now())
				tk.Lease = task.Lease{Holder: holderA, Expires: time.Now().Add(time.Minute)}
				err := s.CreateWithin(ctx, tk, quota)
				if errors.Is(err, task.ErrQuotaExceeded) {
					// Make room: end the oldest task still running.
					mu.Lock()
					ids := created[owner]
					mu.Unlock()
					for _, id := range ids {
						if _, err := s.Update(ctx, owner, id, setStatus(task.StatusCompleted)); err == nil {
							break
						} else if !errors.Is(err, task.ErrTerminal) {
							t.Error(err)
							return
						}
					}
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				created[owner] = append(created[owner], tk.ID)
				mu.Unlock()
				// Work on it from several goroutines.
				var inner sync.WaitGroup
				inner.Go(func() {
					for range 3 {
						if _, err := s.Acquire(ctx, owner, tk.ID, holderA, time.Now(), time.Minute); err != nil && !errors.Is(err, task.ErrTerminal) {
							t.Error(err)
						}
					}
				})
				inner.Go(func() {
					for range 3 {
						_, err := s.Update(ctx, owner, tk.ID, func(t *task.Task) error { t.NextInputKey++; return nil })
						if err != nil && !errors.Is(err, task.ErrTerminal) {
							t.Error(err)
						}
					}
				})
				inner.Go(func() {
					if _, err := s.Get(ctx, owner, tk.ID); err != nil {
						t.Error(err)
					}
					if _, _, err := s.List(ctx, owner, "", 5); err != nil {
						t.Error(err)
					}
					if _, _, err := s.ListActive(ctx, "", 5); err != nil {
						t.Error(err)
					}
					if _, err := s.Sweep(ctx, longAgo, 10); err != nil { // nothing is due yet
						t.Error(err)
					}
				})
				if i%3 == 0 {
					inner.Go(func() {
						_, err := s.Update(ctx, owner, tk.ID, setStatus(task.StatusFailed))
						if err != nil && !errors.Is(err, task.ErrTerminal) {
							t.Error(err)
						}
					})
				}
				inner.Wait()
			}
		})
	}
	wg.Wait()
	for o := range owners {
		owner := fmt.Sprintf("owner-%d", o)
		active := 0
		for _, id := range created[owner] {
			got := mustGet(t, s, owner, id)
			if !got.Status.Terminal() {
				active++
				if got.NextInputKey != 3 {
					t.Errorf("%s: %d of 3 updates landed", id, got.NextInputKey)
				}
			} else if got.Lease != (task.Lease{}) {
				t.Errorf("%s: terminal with lease %+v", id, got.Lease)
			}
		}
		if n, err := s.CountActive(ctx, owner); err != nil || n != active || n > quota {
			t.Errorf("%s: CountActive = %d, %v; %d active records, quota %d", owner, n, err, active, quota)
		}
		ids, _, _ := listAll(t, s, owner, 4)
		if len(ids) != len(created[owner]) {
			t.Errorf("%s: %d listed, %d created", owner, len(ids), len(created[owner]))
		}
	}
}
