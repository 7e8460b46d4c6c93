package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Listings show summaries, and an owner's finished tasks are bounded: a
// listing never carries (so never needs to read) a task's arguments or
// result, and creates stop at the bound on finished tasks until their ttl
// ends.

// bigTask returns a task of owner whose arguments and result are each
// about size bytes, ended as status with an error carrying data.
func bigTask(owner string, created time.Time, size int, status task.Status) *task.Task {
	tk := newTask(owner, created)
	pad := bytes.Repeat([]byte("x"), size)
	tk.Params = json.RawMessage(`{"name":"echo","arguments":{"pad":"` + string(pad) + `"}}`)
	tk.Status, tk.StatusMessage = status, "done: "+string(status)
	tk.Result = json.RawMessage(`{"content":[{"type":"text","text":"` + string(pad) + `"}]}`)
	tk.Error = &jsonrpc.Error{Code: -32001, Message: "it broke", Data: json.RawMessage(`"` + string(pad) + `"`)}
	tk.IsError = true
	tk.History = []task.StatusChange{{From: task.StatusWorking, To: status, At: created}}
	tk.Inputs = []task.InputRequest{
		{Key: "1", Method: "elicitation/create", Params: json.RawMessage(`{"pad":"` + string(pad) + `"}`), Answered: true},
		{Key: "2", Method: "sampling/createMessage", Params: json.RawMessage(`{"pad":"` + string(pad) + `"}`)},
	}
	return tk
}

// checkSummary fails unless got is the summary of want: what listings
// show, and no payload.
func checkSummary(t *testing.T, what string, got, want *task.Task) {
	t.Helper()
	if len(got.Params) != 0 || len(got.Result) != 0 || len(got.History) != 0 || got.Error != nil && len(got.Error.Data) != 0 {
		t.Errorf("%s: task %s carries its payload: %d bytes of params, %d of result, %d history entries", what, got.ID,
			len(got.Params), len(got.Result), len(got.History))
	}
	for _, in := range got.Inputs {
		if len(in.Params) != 0 || in.Answered {
			t.Errorf("%s: task %s carries input request %s whole (answered %v, %d bytes)", what, got.ID, in.Key, in.Answered, len(in.Params))
		}
	}
	if got.ID != want.ID || got.Owner != want.Owner || got.Status != want.Status || got.StatusMessage != want.StatusMessage ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) || got.TTL != want.TTL ||
		got.PollInterval != want.PollInterval || got.Tool != want.Tool || got.IsError != want.IsError ||
		len(got.Outstanding()) != len(want.Outstanding()) {
		t.Errorf("%s: summary %+v does not show task %+v", what, got, want)
	}
	if want.Error != nil && (got.Error == nil || got.Error.Code != want.Error.Code || got.Error.Message != want.Error.Message) {
		t.Errorf("%s: summary error %+v, want code and message of %+v", what, got.Error, want.Error)
	}
}

func testListSummaries(t *testing.T, s task.Store) {
	ctx := context.Background()
	var tasks []*task.Task
	for i, status := range []task.Status{task.StatusCompleted, task.StatusFailed, task.StatusWorking} {
		tk := bigTask("alice", t0.Add(time.Duration(i)*time.Millisecond), 64<<10, status)
		tasks = append(tasks, tk)
		mustCreate(t, s, tk)
	}
	page, _, err := s.List(ctx, "alice", "", 10)
	if err != nil || len(page) != len(tasks) {
		t.Fatalf("List = %d tasks, %v; want %d", len(page), err, len(tasks))
	}
	for i, got := range page {
		checkSummary(t, "List", got, tasks[i])
	}
	all, _, err := adminLister(t, s).ListAll(ctx, task.TaskFilter{}, "", 10)
	if err != nil || len(all) != len(tasks) {
		t.Fatalf("ListAll = %d tasks, %v; want %d", len(all), err, len(tasks))
	}
	for i, got := range all {
		checkSummary(t, "ListAll", got, tasks[len(tasks)-1-i])
	}
	// A lookup has the task whole.
	if got := mustGet(t, s, "alice", tasks[0].ID); !bytes.Equal(got.Result, tasks[0].Result) || !bytes.Equal(got.Params, tasks[0].Params) {
		t.Errorf("Get lost the payload: %d bytes of result, want %d", len(got.Result), len(tasks[0].Result))
	}
	// An update's new state shows in the listing.
	if _, err := s.Update(ctx, "alice", tasks[2].ID, setStatus(task.StatusCancelled)); err != nil {
		t.Fatal(err)
	}
	page, _, err = s.List(ctx, "alice", "", 10)
	if err != nil || len(page) != 3 || page[2].Status != task.StatusCancelled {
		t.Fatalf("List after an update: %v, %v; want the third task cancelled", page, err)
	}
}

// testGetSummary: one task's summary, read without its payload, follows
// its updates, and has Get's errors for another owner's task and a missing
// one.
func testGetSummary(t *testing.T, s task.Store) {
	r, ok := s.(task.SummaryReader)
	if !ok {
		t.Skipf("%T reads no summary of its own (task.GetSummary reads the record)", s)
	}
	ctx := context.Background()
	done := bigTask("alice", t0, 64<<10, task.StatusCompleted)
	open := bigTask("alice", t0.Add(time.Millisecond), 64<<10, task.StatusInputRequired)
	mustCreate(t, s, done, open)
	for _, want := range []*task.Task{done, open} {
		got, err := r.GetSummary(ctx, "alice", want.ID)
		if err != nil {
			t.Fatalf("GetSummary %s: %v", want.ID, err)
		}
		checkSummary(t, "GetSummary", got, want)
	}
	next, err := s.Update(ctx, "alice", open.ID, func(tk *task.Task) error {
		tk.StatusMessage, tk.UpdatedAt = "progress 3/6", tk.UpdatedAt.Add(time.Second)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.GetSummary(ctx, "alice", open.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, "GetSummary after an update", got, next)
	if _, err := r.GetSummary(ctx, "bob", open.ID); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("GetSummary of another owner's task = %v, want ErrNotFound", err)
	}
	if _, err := r.GetSummary(ctx, "alice", task.NewTaskID()); !isPlainNotFound(err) {
		t.Errorf("GetSummary of a missing task = %v, want ErrNotFound", err)
	}
}

// testFinishedBound: at MaxFinished finished tasks, every create of the
// owner is refused (terminal ones too), a repeat still finds its task,
// other owners and the active quota are apart, and a finished task whose
// ttl has ended no longer counts.
func testFinishedBound(t *testing.T, s task.Store) {
	ctx := context.Background()
	limits := task.Limits{MaxActive: 10, MaxFinished: 3}
	keyed := newTask("alice", t0)
	keyed.IdempotencyKey, keyed.Fingerprint = "key", "args"
	shortLived := newTask("alice", t0.Add(time.Millisecond))
	shortLived.TTL = time.Minute
	third, fourth := newTask("alice", t0.Add(2*time.Millisecond)), newTask("alice", t0.Add(3*time.Millisecond))
	for _, tk := range []*task.Task{keyed, shortLived, third, fourth} {
		if err := s.CreateWithinLimits(ctx, tk, limits); err != nil {
			t.Fatalf("create under the bounds: %v", err)
		}
	}
	for _, tk := range []*task.Task{keyed, shortLived, third} {
		if _, err := s.Update(ctx, "alice", tk.ID, setStatus(task.StatusCompleted)); err != nil {
			t.Fatal(err)
		}
	}
	at := func(d time.Duration) *task.Task { return newTask("alice", t0.Add(d)) }
	ended := func(d time.Duration) *task.Task {
		tk := at(d)
		tk.Status = task.StatusFailed
		return tk
	}
	repeat := at(0)
	repeat.IdempotencyKey, repeat.Fingerprint = "key", "args"
	var dup *task.DuplicateError
	steps := []struct {
		name  string
		tk    *task.Task
		check func(error) bool
	}{
		{"working at the bound", at(time.Second), isFinishedQuota(3)},
		{"created terminal at the bound", ended(time.Second), isFinishedQuota(3)},
		{"a repeat at the bound", repeat, func(err error) bool { return errors.As(err, &dup) && dup.TaskID == keyed.ID }},
		{"another owner", newTask("bob", t0), func(err error) bool { return err == nil }},
		{"the short ttl has ended", at(2 * time.Minute), func(err error) bool { return err == nil }},
	}
	for _, st := range steps {
		if err := s.CreateWithinLimits(ctx, st.tk, limits); !st.check(err) {
			t.Errorf("%s: err = %v", st.name, err)
		}
	}
	if err := s.CreateWithinLimits(ctx, ended(2*time.Minute), limits); err != nil {
		t.Fatalf("a finished task in place of the expired one: %v", err)
	}
	if err := s.CreateWithinLimits(ctx, at(2*time.Minute), limits); !isFinishedQuota(3)(err) {
		t.Errorf("at the bound again: err = %v", err)
	}
	if err := s.CreateWithinLimits(ctx, at(2*time.Minute), task.Limits{MaxActive: 10}); err != nil {
		t.Errorf("no bound on finished tasks: err = %v", err)
	}
}

func isFinishedQuota(limit int) func(error) bool {
	return func(err error) bool {
		var q *task.QuotaError
		return errors.As(err, &q) && errors.Is(err, task.ErrQuotaExceeded) && q.Finished && q.Limit == limit
	}
}
