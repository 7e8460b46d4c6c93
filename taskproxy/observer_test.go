package taskproxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// countingObserver records TaskEnded calls.
type countingObserver struct {
	mu    sync.Mutex
	ended map[Status]int
}

func (o *countingObserver) TaskCreated(Era) {}
func (o *countingObserver) Refused(string)  {}
func (o *countingObserver) TaskEnded(_ Era, s Status, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended[s]++
}

// A cancelled task reaches the observer as every other ending does, so the
// ended counter and the duration histogram count it.
func TestCancelCountsAsEnded(t *testing.T) {
	obs := &countingObserver{ended: map[Status]int{}}
	g := testGateway(t, Config{Observer: obs})
	// Leased to this process: the recovery pass that the gateway's first
	// request starts would otherwise fail a task no worker holds before
	// the test cancels it.
	leased := func(era Era) *Task {
		task := testTask(Anonymous, clock())
		task.Era = era
		task.Lease = Lease{Holder: g.rt.Store.Holder(), Expires: clock().Add(time.Hour)}
		return task
	}
	for _, era := range []Era{EraLegacy, EraModern} {
		task := leased(era)
		if err := g.rt.Store.Create(context.Background(), task); err != nil {
			t.Fatal(err)
		}
		if _, err := g.cancelTask(context.Background(), Anonymous, task.ID, http.NotFoundHandler()); err != nil {
			t.Fatalf("%s: cancel: %v", era, err)
		}
	}
	// And through the wire, as a client cancels.
	task := leased(EraLegacy)
	if err := g.rt.Store.Create(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := post(`{"jsonrpc":"2.0","id":1,"method":"tasks/cancel","params":{"taskId":"` + task.ID + `"}}`)
	if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("tasks/cancel: %d %s", rec.Code, rec.Body)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.ended[StatusCancelled] != 3 {
		t.Errorf("TaskEnded(cancelled) called %d times, want 3", obs.ended[StatusCancelled])
	}
}
