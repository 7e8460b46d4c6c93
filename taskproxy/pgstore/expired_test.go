package pgstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// ListExpiredLeases lists the active tasks whose lease ran out, page by
// page, and none with a live lease, none ended.
func TestListExpiredLeases(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	ctx := context.Background()
	now := time.Now()
	var want []string
	for i, lease := range []time.Duration{-time.Minute, time.Minute, -time.Second, -time.Hour, time.Hour, -time.Minute} {
		tk := tk("alice")
		tk.Lease = task.Lease{Holder: "dead-replica", Expires: now.Add(lease)}
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 5: // ended: its lease goes with it
			if _, err := s.Update(ctx, "alice", tk.ID, func(rec *task.Task) error {
				return rec.SetStatus(task.StatusCompleted, "", time.Now())
			}); err != nil {
				t.Fatal(err)
			}
		case lease < 0:
			want = append(want, tk.ID)
		}
	}
	slices.Sort(want)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, next, err := s.ListExpiredLeases(ctx, now, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range page {
			got = append(got, tk.ID)
			if tk.Lease.Holder != "dead-replica" || tk.Lease.Expires.After(now) {
				t.Errorf("task %s listed with lease %+v", tk.ID, tk.Lease)
			}
		}
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("the listing does not end")
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
}
