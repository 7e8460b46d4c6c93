package taskproxy

import (
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// runObserver records what a task.RunObserver is told.
type runObserver struct {
	mu        sync.Mutex
	failed    map[task.FailReason]int
	takenOver map[task.TakeoverCause]int
}

func newRunObserver() *runObserver {
	return &runObserver{failed: map[task.FailReason]int{}, takenOver: map[task.TakeoverCause]int{}}
}

func (o *runObserver) TaskCreated(task.Era)                           {}
func (o *runObserver) TaskEnded(task.Era, task.Status, time.Duration) {}
func (o *runObserver) Refused(string)                                 {}

func (o *runObserver) TaskFailed(_ task.Era, reason task.FailReason) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failed[reason]++
}

func (o *runObserver) TakenOver(cause task.TakeoverCause) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.takenOver[cause]++
}

func (o *runObserver) counts() (failed map[task.FailReason]int, takenOver map[task.TakeoverCause]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.failed), maps.Clone(o.takenOver)
}

// The observer hears of each task taken over, by cause: the orphans found
// at the start (a previous process's) and those of a replica whose lease
// expired; the ones that fail, their outcome unknown, fail as interrupted.
func TestObserverCountsTakeovers(t *testing.T) {
	t.Parallel()
	store := newMemStore(t)
	ctx := t.Context()
	past := runtime.Now().Add(-time.Hour)
	orphan := func(holder string) {
		err := store.Create(ctx, &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
			TTL: 24 * time.Hour, Era: task.Era2025, Tool: "other", Params: json.RawMessage(`{"name":"other"}`),
			Lease: task.Lease{Holder: holder, Expires: past}, Endpoint: "/mcp", Route: "a"})
		if err != nil {
			t.Fatal(err)
		}
	}
	orphan("the-previous-process")
	orphan("the-previous-process")
	obs := newRunObserver()
	rt := NewRuntime(store)
	defer rt.Close(time.Second)
	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Route: "a", Observer: obs}, rt)
	mustStart(t, g)
	wait := func(what string, cond func(map[task.FailReason]int, map[task.TakeoverCause]int) bool) {
		t.Helper()
		waitFor(t, what, func() bool { return cond(obs.counts()) })
	}
	wait("the start's recovery", func(f map[task.FailReason]int, to map[task.TakeoverCause]int) bool {
		return to[task.TakeoverRestart] == 2 && f[task.FailInterrupted] == 2
	})
	orphan("another-replica")
	if n, err := rt.TakeOver(runtime.Now()); n != 1 || err != nil {
		t.Fatalf("took over %d tasks (%v), want 1", n, err)
	}
	wait("the takeover", func(f map[task.FailReason]int, to map[task.TakeoverCause]int) bool {
		return to[task.TakeoverReplica] == 1 && f[task.FailInterrupted] == 3
	})
	failed, takenOver := obs.counts()
	if len(failed) != 1 || len(takenOver) != 2 || takenOver[task.TakeoverRestart] != 2 {
		t.Errorf("failed %v, taken over %v; want 3 interrupted, 2 at the restart and 1 from a replica", failed, takenOver)
	}
}
