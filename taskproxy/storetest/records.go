package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Records: create, read back, the state machine, compare-and-set updates.

func testCreateGet(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	task := newTask("alice", time.Now())
	mustCreate(t, s, task)
	if err := s.Create(ctx, task); !errors.Is(err, taskproxy.ErrExists) {
		t.Errorf("second Create of one id: err = %v, want ErrExists", err)
	}
	got := mustGet(t, s, "alice", task.ID)
	if got.ID != task.ID || got.Status != taskproxy.StatusWorking {
		t.Errorf("Get = %+v", got)
	}
	if _, err := s.Get(ctx, "alice", taskproxy.NewTaskID()); !isPlainNotFound(err) {
		t.Errorf("Get of an unknown id: err = %v, want plain ErrNotFound", err)
	}
	// Created terminal (a call that ended before it became a task).
	ended := newTask("alice", time.Now())
	ended.Status = taskproxy.StatusCompleted
	ended.Result = json.RawMessage(`{"content":[]}`)
	mustCreate(t, s, ended)
	if got := mustGet(t, s, "alice", ended.ID); got.Status != taskproxy.StatusCompleted {
		t.Errorf("task created completed reads back %s", got.Status)
	}
}

// Every field of a record survives the store, nanoseconds and all.
func testRecordRoundTrip(t *testing.T, s taskproxy.Store) {
	created := time.Date(2026, 11, 30, 12, 34, 56, 123456789, time.UTC)
	task := &taskproxy.Task{
		ID: taskproxy.NewTaskID(), Owner: "iss|aud\x00tenant\x00alice", Principal: "alice", Tenant: "acme",
		Status: taskproxy.StatusInputRequired, StatusMessage: "waiting for you",
		CreatedAt: created, UpdatedAt: created.Add(time.Second + 7), TTL: 90 * time.Minute, PollInterval: 1500 * time.Millisecond,
		Era: taskproxy.EraLegacy, Tool: "slow_compute", Params: json.RawMessage(`{"name":"slow_compute","arguments":{"big":9007199254740993,"s":"é\u2028"}}`),
		Session: "sess-1", UpstreamID: json.RawMessage(`"gw-7"`), Round: 2,
		Inputs: []taskproxy.InputRequest{
			{Key: "1", Method: "elicitation/create", Params: json.RawMessage(`{"message":"ok?"}`), UpstreamID: json.RawMessage(`5`), Round: 1, Answered: true},
			{Key: "2", Method: "sampling/createMessage", UpstreamKey: "u-2", Round: 2, Response: json.RawMessage(`{"x":1}`)},
		},
		NextInputKey:   2,
		Error:          &jsonrpc.Error{Code: -32000, Message: "boom", Data: json.RawMessage(`{"why":"because"}`)},
		IsError:        true,
		Lease:          taskproxy.Lease{Holder: "storetest/holder", Expires: created.Add(30*time.Second + 5)},
		IdempotencyKey: "k-hash", Fingerprint: "f-hash",
		Endpoint: "/mcp", Host: "gw.example", Headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
		Route: "srv0/route1", RequestState: "opaque", LoadShed: 3,
	}
	mustCreate(t, s, task)
	got := mustGet(t, s, task.Owner, task.ID)
	if !sameTask(got, task) {
		t.Errorf("record changed in the store:\n got  %s\n want %s", dump(got), dump(task))
	}
}

// sameTask compares records as their JSON: times by instant, raw JSON by
// its compacted bytes.
func sameTask(a, b *taskproxy.Task) bool {
	return reflect.DeepEqual(dump(a), dump(b))
}

func dump(t *taskproxy.Task) string {
	c := t.Clone()
	c.CreatedAt, c.UpdatedAt, c.Lease.Expires = c.CreatedAt.UTC(), c.UpdatedAt.UTC(), c.Lease.Expires.UTC()
	data, _ := json.Marshal(c)
	return string(data)
}

// A task of another owner is ErrNotFound to every lookup and write, refined
// as ErrForeign for the audit log; it is never changed.
func testOwnerIsolation(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	task := newTask("alice", t0)
	task.Lease = taskproxy.Lease{Holder: "storetest/a", Expires: t0.Add(time.Minute)}
	mustCreate(t, s, task)
	ops := []struct {
		name string
		op   func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, "bob", task.ID); return err }},
		{"Update", func() error {
			_, err := s.Update(ctx, "bob", task.ID, setStatus(taskproxy.StatusCancelled))
			return err
		}},
		{"Acquire", func() error {
			_, err := s.Acquire(ctx, "bob", task.ID, "storetest/b", t0.Add(time.Hour), time.Minute)
			return err
		}},
		// Owner keys are opaque: a prefix or a case change is another owner.
		{"Get by a prefix of the owner", func() error { _, err := s.Get(ctx, "alic", task.ID); return err }},
		{"Get by another case", func() error { _, err := s.Get(ctx, "Alice", task.ID); return err }},
	}
	for _, op := range ops {
		if err := op.op(); !errors.Is(err, taskproxy.ErrNotFound) || !errors.Is(err, taskproxy.ErrForeign) {
			t.Errorf("%s of alice's task as another owner: err = %v, want ErrForeign (an ErrNotFound)", op.name, err)
		}
	}
	got := mustGet(t, s, "alice", task.ID)
	if got.Status != taskproxy.StatusWorking || got.Lease.Holder != "storetest/a" {
		t.Errorf("another owner changed alice's task: %+v", got)
	}
	if page, _, err := s.List(ctx, "bob", "", 10); err != nil || len(page) != 0 {
		t.Errorf("bob lists %d tasks (%v), want none", len(page), err)
	}
	if n, err := s.CountActive(ctx, "bob"); err != nil || n != 0 {
		t.Errorf("CountActive(bob) = %d, %v; want 0", n, err)
	}
}

var errAbort = errors.New("storetest: fn refused")

func testUpdateRules(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	task := newTask("alice", t0)
	mustCreate(t, s, task)
	steps := []struct {
		name       string
		fn         func(*taskproxy.Task) error
		want       error
		wantStatus taskproxy.Status // after the step
	}{
		{"to input_required", setStatus(taskproxy.StatusInputRequired), nil, taskproxy.StatusInputRequired},
		{"fields without a status change", func(t *taskproxy.Task) error { t.StatusMessage = "half"; t.NextInputKey = 3; return nil }, nil, taskproxy.StatusInputRequired},
		{"fn error aborts, changes dropped", func(t *taskproxy.Task) error {
			t.Status = taskproxy.StatusFailed
			t.StatusMessage = "x"
			return errAbort
		}, errAbort, taskproxy.StatusInputRequired},
		{"unknown status refused", func(t *taskproxy.Task) error { t.Status = "paused"; return nil }, taskproxy.ErrBadTransition, taskproxy.StatusInputRequired},
		{"back to working", setStatus(taskproxy.StatusWorking), nil, taskproxy.StatusWorking},
		{"to completed", func(t *taskproxy.Task) error {
			t.Result = json.RawMessage(`{"ok":true}`)
			return setStatus(taskproxy.StatusCompleted)(t)
		}, nil, taskproxy.StatusCompleted},
		{"terminal never changes", setStatus(taskproxy.StatusWorking), taskproxy.ErrTerminal, taskproxy.StatusCompleted},
		{"terminal never changes, even without a status change", func(t *taskproxy.Task) error { t.StatusMessage = "late"; return nil }, taskproxy.ErrTerminal, taskproxy.StatusCompleted},
		{"terminal to another terminal", func(t *taskproxy.Task) error { t.Status = taskproxy.StatusCancelled; return nil }, taskproxy.ErrTerminal, taskproxy.StatusCompleted},
	}
	for _, st := range steps {
		called := false
		out, err := s.Update(ctx, "alice", task.ID, func(t *taskproxy.Task) error { called = true; return st.fn(t) })
		if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", st.name, err, st.want)
		}
		if errors.Is(st.want, taskproxy.ErrTerminal) && called {
			t.Errorf("%s: fn was given a terminal task", st.name)
		}
		if err == nil && (out == nil || out.Status != st.wantStatus) {
			t.Errorf("%s: Update returned %+v", st.name, out)
		}
		if got := mustGet(t, s, "alice", task.ID); got.Status != st.wantStatus {
			t.Errorf("%s: status %s after the step, want %s", st.name, got.Status, st.wantStatus)
		}
	}
	got := mustGet(t, s, "alice", task.ID)
	if got.StatusMessage != "" || got.NextInputKey != 3 || string(got.Result) != `{"ok":true}` {
		t.Errorf("final record %+v", got)
	}
	if _, err := s.Update(ctx, "alice", taskproxy.NewTaskID(), func(*taskproxy.Task) error { return nil }); !isPlainNotFound(err) {
		t.Errorf("Update of an unknown id: err = %v, want plain ErrNotFound", err)
	}
	// Every terminal status is final.
	for _, st := range []taskproxy.Status{taskproxy.StatusCompleted, taskproxy.StatusFailed, taskproxy.StatusCancelled} {
		ended := newTask("alice", t0)
		ended.Status = st
		mustCreate(t, s, ended)
		if _, err := s.Update(ctx, "alice", ended.ID, setStatus(taskproxy.StatusWorking)); !errors.Is(err, taskproxy.ErrTerminal) {
			t.Errorf("Update of a task created %s: err = %v, want ErrTerminal", st, err)
		}
	}
}

// An update may not change what identifies and places a record.
func testUpdateImmutableFields(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	task := newTask("alice", t0)
	mustCreate(t, s, task)
	tests := []struct {
		name string
		fn   func(*taskproxy.Task)
	}{
		{"id", func(t *taskproxy.Task) { t.ID = taskproxy.NewTaskID() }},
		{"owner", func(t *taskproxy.Task) { t.Owner = "bob" }},
		{"createdAt", func(t *taskproxy.Task) { t.CreatedAt = t.CreatedAt.Add(-time.Hour) }},
		{"ttl", func(t *taskproxy.Task) { t.TTL *= 2 }},
	}
	for _, tt := range tests {
		if _, err := s.Update(ctx, "alice", task.ID, func(t *taskproxy.Task) error { tt.fn(t); return nil }); err == nil {
			t.Errorf("an update changing the %s succeeded", tt.name)
		}
	}
	if got := mustGet(t, s, "alice", task.ID); !sameTask(got, task) {
		t.Errorf("refused updates changed the record: %s", dump(got))
	}
	if _, err := s.Get(ctx, "bob", task.ID); !errors.Is(err, taskproxy.ErrForeign) {
		t.Errorf("after a refused owner change, bob's Get: %v", err)
	}
}

// Concurrent compare-and-set: every increment lands exactly once.
func testUpdateConcurrent(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	task := newTask("alice", t0)
	mustCreate(t, s, task)
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.Update(ctx, "alice", task.ID, func(t *taskproxy.Task) error { t.NextInputKey++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := mustGet(t, s, "alice", task.ID); got.NextInputKey != n {
		t.Fatalf("NextInputKey = %d after %d concurrent increments (lost updates)", got.NextInputKey, n)
	}
}

// Of racing terminal transitions exactly one wins; the others see
// ErrTerminal, and the winner's record is what stays.
func testTerminalRace(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	for round := range 5 {
		task := newTask("alice", t0)
		mustCreate(t, s, task)
		var mu sync.Mutex
		var winner taskproxy.Status
		wins, refused := 0, 0
		var wg sync.WaitGroup
		for _, to := range []taskproxy.Status{taskproxy.StatusCompleted, taskproxy.StatusCancelled, taskproxy.StatusFailed, taskproxy.StatusCancelled, taskproxy.StatusCompleted} {
			wg.Go(func() {
				_, err := s.Update(ctx, "alice", task.ID, func(t *taskproxy.Task) error {
					return t.SetStatus(to, string(to), t.UpdatedAt)
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
					winner = to
				case errors.Is(err, taskproxy.ErrTerminal):
					refused++
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wins != 1 || refused != 4 {
			t.Errorf("round %d: %d wins, %d refused; want 1 and 4", round, wins, refused)
		}
		if got := mustGet(t, s, "alice", task.ID); got.Status != winner || got.StatusMessage != string(winner) {
			t.Errorf("round %d: stored %s (%q), the winner was %s", round, got.Status, got.StatusMessage, winner)
		}
	}
}

// A closed store refuses every call with ErrClosed; closing again is fine.
func testClosed(t *testing.T, s taskproxy.Store) {
	ctx := context.Background()
	task := newTask("alice", t0)
	mustCreate(t, s, task)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"Create", func() error { return s.Create(ctx, newTask("alice", t0)) }},
		{"CreateWithin", func() error { return s.CreateWithin(ctx, newTask("alice", t0), 5) }},
		{"Get", func() error { _, err := s.Get(ctx, "alice", task.ID); return err }},
		{"Update", func() error {
			_, err := s.Update(ctx, "alice", task.ID, func(*taskproxy.Task) error { return nil })
			return err
		}},
		{"List", func() error { _, _, err := s.List(ctx, "alice", "", 10); return err }},
		{"CountActive", func() error { _, err := s.CountActive(ctx, "alice"); return err }},
		{"ListActive", func() error { _, _, err := s.ListActive(ctx, "", 10); return err }},
		{"Acquire", func() error { _, err := s.Acquire(ctx, "alice", task.ID, "h", t0, time.Minute); return err }},
		{"Sweep", func() error { _, err := s.Sweep(ctx, t0, 10); return err }},
		{"BindSession", func() error { return s.BindSession(ctx, "S", "alice", time.Hour) }},
		{"CheckSession", func() error { return s.CheckSession(ctx, "S", "alice", 0) }},
		{"ForgetSession", func() error { return s.ForgetSession(ctx, "S") }},
	}
	for _, op := range ops {
		if err := op.op(); !errors.Is(err, taskproxy.ErrClosed) {
			t.Errorf("%s on a closed store: err = %v, want ErrClosed", op.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
