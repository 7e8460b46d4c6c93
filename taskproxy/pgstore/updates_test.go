package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The group commit of updates ([updateGroups]): updates waiting together are
// one statement, and each keeps its own outcome.
func TestUpdateGroup(t *testing.T) {
	t.Parallel()
	s := open(t, newSchema(t))
	ctx := context.Background()
	var tasks []*task.Task
	for i := range 40 {
		x := tk([]string{"alice", "bob"}[i%2])
		if err := s.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, x)
	}
	ended := tasks[39]
	if _, err := s.Update(ctx, ended.Owner, ended.ID, func(t *task.Task) error { return t.SetStatus(task.StatusFailed, "", time.Now()) }); err != nil {
		t.Fatal(err)
	}
	refusal := errors.New("refused by fn")
	type call struct {
		owner, id string
		fn        func(*task.Task) error
		ok        func(*task.Task, error) bool
	}
	complete := func(t *task.Task) error { return t.SetStatus(task.StatusCompleted, "", time.Now()) }
	var calls []call
	for _, x := range tasks[:36] {
		calls = append(calls, call{x.Owner, x.ID, complete, func(got *task.Task, err error) bool {
			return err == nil && got.Status == task.StatusCompleted && got.Lease == (task.Lease{})
		}})
	}
	calls = append(calls,
		call{"bob", tasks[36].ID, complete, func(_ *task.Task, err error) bool { return errors.Is(err, task.ErrNotFound) }}, // alice's
		call{"alice", task.NewTaskID(), complete, func(_ *task.Task, err error) bool { return errors.Is(err, task.ErrNotFound) }},
		call{tasks[37].Owner, tasks[37].ID, func(*task.Task) error { return refusal }, func(_ *task.Task, err error) bool { return errors.Is(err, refusal) }},
		call{ended.Owner, ended.ID, complete, func(_ *task.Task, err error) bool { return errors.Is(err, task.ErrTerminal) }},
	)
	before := pgstore.UpdateGroups(s)
	held, release := pgstore.HoldUpdates(s)
	results := make([]error, len(calls))
	var wg sync.WaitGroup
	run := func(i int) {
		c := calls[i]
		got, err := s.Update(ctx, c.owner, c.id, c.fn)
		if !c.ok(got, err) {
			results[i] = errors.Join(errors.New("unexpected outcome"), err)
		}
	}
	wg.Go(func() { run(0) })
	<-held
	for i := 1; i < len(calls); i++ {
		wg.Go(func() { run(i) })
	}
	waitFor(t, func() bool { return pgstore.QueuedUpdates(s) == len(calls)-1 })
	release()
	wg.Wait()
	for i, err := range results {
		if err != nil {
			t.Errorf("update %d: %v", i, err)
		}
	}
	if n := pgstore.UpdateGroups(s) - before; n != 1 {
		t.Errorf("%d updates waiting together written in %d statements, want 1", len(calls), n)
	}
	for _, x := range tasks[:36] {
		if got, err := s.Get(ctx, x.Owner, x.ID); err != nil || got.Status != task.StatusCompleted {
			t.Errorf("Get %s: %v, %v", x.ID, got, err)
		}
	}
	if got, err := s.Get(ctx, tasks[37].Owner, tasks[37].ID); err != nil || got.Status != task.StatusWorking {
		t.Errorf("the task whose fn refused: %v, %v", got, err)
	}
}
