package task_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// countingTimer counts the calls of each operation.
type countingTimer struct {
	n [task.NumStoreOps]atomic.Int64
}

func (c *countingTimer) StoreCall(op task.StoreOp, took time.Duration) {
	if took < 0 {
		panic("negative store call duration")
	}
	c.n[op].Add(1)
}

func openTimed(t *testing.T) (*task.TimedStore, *countingTimer) {
	t.Helper()
	s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	timer := &countingTimer{}
	return task.NewTimedStore(s, timer), timer
}

// Every timed method is counted under its operation, once per call.
func TestTimedStoreOps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, timer := openTimed(t)
	now := time.Now()
	mk := func() *task.Task {
		return &task.Task{ID: task.NewTaskID(), Owner: "alice", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Tool: "t"}
	}
	a, b, c := mk(), mk(), mk()
	steps := []struct {
		op   task.StoreOp
		call func() error
	}{
		{task.OpCreate, func() error { return s.Create(ctx, a) }},
		{task.OpCreate, func() error { return s.CreateWithin(ctx, b, 10) }},
		{task.OpCreate, func() error { return s.CreateWithinLimits(ctx, c, task.Limits{MaxActive: 10}) }},
		{task.OpGet, func() error { _, err := s.Get(ctx, "alice", a.ID); return err }},
		{task.OpGet, func() error { _, err := s.GetSummary(ctx, "alice", a.ID); return err }},
		{task.OpUpdate, func() error {
			_, err := s.Update(ctx, "alice", a.ID, func(r *task.Task) error { r.StatusMessage = "x"; return nil })
			return err
		}},
		{task.OpList, func() error { _, _, err := s.List(ctx, "alice", "", 10); return err }},
		{task.OpList, func() error { _, _, err := s.ListActive(ctx, "", 10); return err }},
		{task.OpCount, func() error { _, err := s.CountActive(ctx, "alice"); return err }},
		{task.OpAcquire, func() error { _, err := s.Acquire(ctx, "alice", a.ID, s.Holder(), now, time.Minute); return err }},
		{task.OpSweep, func() error { _, err := s.Sweep(ctx, now, 10); return err }},
		{task.OpSession, func() error { return s.BindSession(ctx, "s1", "alice", time.Hour) }},
		{task.OpSession, func() error { return s.CheckSession(ctx, "s1", "alice", 0) }},
		{task.OpSession, func() error { return s.DescribeSession(ctx, "s1", "alice", []byte("{}")) }},
		{task.OpSession, func() error { _, err := s.SessionDescription(ctx, "s1", "alice"); return err }},
		{task.OpSession, func() error { return s.ForgetSession(ctx, "s1") }},
		{task.OpLearned, func() error { return s.SaveLearned(ctx, "k", []byte("v"), time.Hour) }},
		{task.OpLearned, func() error { _, err := s.LoadLearned(ctx, "k"); return err }},
	}
	var want [task.NumStoreOps]int64
	for i, st := range steps {
		if err := st.call(); err != nil {
			t.Fatalf("step %d (%s): %v", i, st.op, err)
		}
		want[st.op]++
		for op := range task.NumStoreOps {
			if got := timer.n[op].Load(); got != want[op] {
				t.Fatalf("after step %d (%s): %s counted %d times, want %d", i, st.op, op, got, want[op])
			}
		}
	}
	for op := range task.NumStoreOps {
		if want[op] == 0 {
			t.Errorf("no step times %s", op)
		}
	}
}

// The operations' names are the metric's labels.
func TestStoreOpNames(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for op := range task.NumStoreOps {
		name := op.String()
		if name == "" || name == "unknown" || seen[name] {
			t.Errorf("op %d has name %q", op, name)
		}
		seen[name] = true
	}
	if got := task.NumStoreOps.String(); got != "unknown" {
		t.Errorf("out of range op named %q", got)
	}
}
