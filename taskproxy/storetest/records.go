package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Records: create, read back, the state machine, compare-and-set updates.

func testCreateGet(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", time.Now())
	mustCreate(t, s, tk)
	if err := s.Create(ctx, tk); !errors.Is(err, task.ErrExists) {
		t.Errorf("second Create of one id: err = %v, want ErrExists", err)
	}
	got := mustGet(t, s, "alice", tk.ID)
	if got.ID != tk.ID || got.Status != task.StatusWorking {
		t.Errorf("Get = %+v", got)
	}
	if _, err := s.Get(ctx, "alice", task.NewTaskID()); !isPlainNotFound(err) {
		t.Errorf("Get of an unknown id: err = %v, want plain ErrNotFound", err)
	}
	// Created terminal (a call that ended before it became a task).
	ended := newTask("alice", time.Now())
	ended.Status = task.StatusCompleted
	ended.Result = json.RawMessage(`{"content":[]}`)
	mustCreate(t, s, ended)
	if got := mustGet(t, s, "alice", ended.ID); got.Status != task.StatusCompleted {
		t.Errorf("task created completed reads back %s", got.Status)
	}
}

// Every field of a record survives the store, nanoseconds and all.
func testRecordRoundTrip(t *testing.T, s task.Store) {
	created := time.Date(2026, 11, 30, 12, 34, 56, 123456789, time.UTC)
	tk := &task.Task{
		ID: task.NewTaskID(), Owner: "iss|aud\x00tenant\x00alice", Principal: "alice", Tenant: "acme", QuotaKey: "ip:192.0.2.7",
		Status: task.StatusInputRequired, StatusMessage: "waiting for you",
		CreatedAt: created, UpdatedAt: created.Add(time.Second + 7), TTL: 90 * time.Minute, PollInterval: 1500 * time.Millisecond,
		Era: task.Era2025, Tool: "slow_compute", Params: json.RawMessage(`{"name":"slow_compute","arguments":{"big":9007199254740993,"s":"é\u2028"}}`),
		Session: "sess-1", UpstreamID: json.RawMessage(`"gw-7"`), Round: 2,
		Inputs: []task.InputRequest{
			{Key: "1", Method: "elicitation/create", Params: json.RawMessage(`{"message":"ok?"}`), UpstreamID: json.RawMessage(`5`), Round: 1, Answered: true},
			{Key: "2", Method: "sampling/createMessage", UpstreamKey: "u-2", Round: 2, Response: json.RawMessage(`{"x":1}`)},
		},
		NextInputKey:   2,
		Error:          &jsonrpc.Error{Code: -32000, Message: "boom", Data: json.RawMessage(`{"why":"because"}`)},
		IsError:        true,
		Lease:          task.Lease{Holder: "storetest/holder", Expires: created.Add(30*time.Second + 5)},
		IdempotencyKey: "k-hash", Fingerprint: "f-hash",
		Endpoint: "/mcp", Host: "gw.example", Headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
		Route: "srv0/route1", RequestState: "opaque", LoadShed: 3,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "vendor=opaque,other=1",
	}
	mustCreate(t, s, tk)
	got := mustGet(t, s, tk.Owner, tk.ID)
	if !sameTask(got, tk) {
		t.Errorf("record changed in the store:\n got  %s\n want %s", dump(got), dump(tk))
	}
}

// sameTask compares records as their JSON: times by instant, raw JSON by
// its compacted bytes.
func sameTask(a, b *task.Task) bool {
	return reflect.DeepEqual(dump(a), dump(b))
}

func dump(t *task.Task) string {
	c := t.Clone()
	c.CreatedAt, c.UpdatedAt, c.Lease.Expires = c.CreatedAt.UTC(), c.UpdatedAt.UTC(), c.Lease.Expires.UTC()
	data, _ := json.Marshal(c)
	return string(data)
}

// A task of another owner is ErrNotFound to every lookup and write, refined
// as ErrForeign for the audit log; it is never changed.
func testOwnerIsolation(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	tk.Lease = task.Lease{Holder: "storetest/a", Expires: t0.Add(time.Minute)}
	mustCreate(t, s, tk)
	ops := []struct {
		name string
		op   func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, "bob", tk.ID); return err }},
		{"Update", func() error {
			_, err := s.Update(ctx, "bob", tk.ID, setStatus(task.StatusCancelled))
			return err
		}},
		{"Acquire", func() error {
			_, err := s.Acquire(ctx, "bob", tk.ID, "storetest/b", t0.Add(time.Hour), time.Minute)
			return err
		}},
		// Owner keys are opaque: a prefix or a case change is another owner.
		{"Get by a prefix of the owner", func() error { _, err := s.Get(ctx, "alic", tk.ID); return err }},
		{"Get by another case", func() error { _, err := s.Get(ctx, "Alice", tk.ID); return err }},
	}
	for _, op := range ops {
		if err := op.op(); !errors.Is(err, task.ErrNotFound) || !errors.Is(err, task.ErrForeign) {
			t.Errorf("%s of alice's task as another owner: err = %v, want ErrForeign (an ErrNotFound)", op.name, err)
		}
	}
	got := mustGet(t, s, "alice", tk.ID)
	if got.Status != task.StatusWorking || got.Lease.Holder != "storetest/a" {
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

func testUpdateRules(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	mustCreate(t, s, tk)
	steps := []struct {
		name       string
		fn         func(*task.Task) error
		want       error
		wantStatus task.Status // after the step
	}{
		{"to input_required", setStatus(task.StatusInputRequired), nil, task.StatusInputRequired},
		{"fields without a status change", func(t *task.Task) error { t.StatusMessage = "half"; t.NextInputKey = 3; return nil }, nil, task.StatusInputRequired},
		{"fn error aborts, changes dropped", func(t *task.Task) error {
			t.Status = task.StatusFailed
			t.StatusMessage = "x"
			return errAbort
		}, errAbort, task.StatusInputRequired},
		{"unknown status refused", func(t *task.Task) error { t.Status = "paused"; return nil }, task.ErrBadTransition, task.StatusInputRequired},
		{"back to working", setStatus(task.StatusWorking), nil, task.StatusWorking},
		{"to completed", func(t *task.Task) error {
			t.Result = json.RawMessage(`{"ok":true}`)
			return setStatus(task.StatusCompleted)(t)
		}, nil, task.StatusCompleted},
		{"terminal never changes", setStatus(task.StatusWorking), task.ErrTerminal, task.StatusCompleted},
		{"terminal never changes, even without a status change", func(t *task.Task) error { t.StatusMessage = "late"; return nil }, task.ErrTerminal, task.StatusCompleted},
		{"terminal to another terminal", func(t *task.Task) error { t.Status = task.StatusCancelled; return nil }, task.ErrTerminal, task.StatusCompleted},
	}
	for _, st := range steps {
		called := false
		out, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { called = true; return st.fn(t) })
		if !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Errorf("%s: err = %v, want %v", st.name, err, st.want)
		}
		if errors.Is(st.want, task.ErrTerminal) && called {
			t.Errorf("%s: fn was given a terminal task", st.name)
		}
		if err == nil && (out == nil || out.Status != st.wantStatus) {
			t.Errorf("%s: Update returned %+v", st.name, out)
		}
		if got := mustGet(t, s, "alice", tk.ID); got.Status != st.wantStatus {
			t.Errorf("%s: status %s after the step, want %s", st.name, got.Status, st.wantStatus)
		}
	}
	got := mustGet(t, s, "alice", tk.ID)
	if got.StatusMessage != "" || got.NextInputKey != 3 || string(got.Result) != `{"ok":true}` {
		t.Errorf("final record %+v", got)
	}
	if _, err := s.Update(ctx, "alice", task.NewTaskID(), func(*task.Task) error { return nil }); !isPlainNotFound(err) {
		t.Errorf("Update of an unknown id: err = %v, want plain ErrNotFound", err)
	}
	// Every terminal status is final.
	for _, st := range []task.Status{task.StatusCompleted, task.StatusFailed, task.StatusCancelled} {
		ended := newTask("alice", t0)
		ended.Status = st
		mustCreate(t, s, ended)
		if _, err := s.Update(ctx, "alice", ended.ID, setStatus(task.StatusWorking)); !errors.Is(err, task.ErrTerminal) {
			t.Errorf("Update of a task created %s: err = %v, want ErrTerminal", st, err)
		}
	}
}

// An update may not change what identifies and places a record.
func testUpdateImmutableFields(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	mustCreate(t, s, tk)
	tests := []struct {
		name string
		fn   func(*task.Task)
	}{
		{"id", func(t *task.Task) { t.ID = task.NewTaskID() }},
		{"owner", func(t *task.Task) { t.Owner = "bob" }},
		{"quota key", func(t *task.Task) { t.QuotaKey = "ip:192.0.2.1" }},
		{"createdAt", func(t *task.Task) { t.CreatedAt = t.CreatedAt.Add(-time.Hour) }},
		{"ttl", func(t *task.Task) { t.TTL *= 2 }},
	}
	for _, tt := range tests {
		if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { tt.fn(t); return nil }); err == nil {
			t.Errorf("an update changing the %s succeeded", tt.name)
		}
	}
	if got := mustGet(t, s, "alice", tk.ID); !sameTask(got, tk) {
		t.Errorf("refused updates changed the record: %s", dump(got))
	}
	if _, err := s.Get(ctx, "bob", tk.ID); !errors.Is(err, task.ErrForeign) {
		t.Errorf("after a refused owner change, bob's Get: %v", err)
	}
}

// Concurrent compare-and-set: every increment lands exactly once.
func testUpdateConcurrent(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	mustCreate(t, s, tk)
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error { t.NextInputKey++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := mustGet(t, s, "alice", tk.ID); got.NextInputKey != n {
		t.Fatalf("NextInputKey = %d after %d concurrent increments (lost updates)", got.NextInputKey, n)
	}
}

// Of racing terminal transitions exactly one wins; the others see
// ErrTerminal, and the winner's record is what stays.
func testTerminalRace(t *testing.T, s task.Store) {
	ctx := context.Background()
	for round := range 5 {
		tk := newTask("alice", t0)
		mustCreate(t, s, tk)
		var mu sync.Mutex
		var winner task.Status
		wins, refused := 0, 0
		var wg sync.WaitGroup
		for _, to := range []task.Status{task.StatusCompleted, task.StatusCancelled, task.StatusFailed, task.StatusCancelled, task.StatusCompleted} {
			wg.Go(func() {
				_, err := s.Update(ctx, "alice", tk.ID, func(t *task.Task) error {
					return t.SetStatus(to, string(to), t.UpdatedAt)
				})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
					winner = to
				case errors.Is(err, task.ErrTerminal):
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
		if got := mustGet(t, s, "alice", tk.ID); got.Status != winner || got.StatusMessage != string(winner) {
			t.Errorf("round %d: stored %s (%q), the winner was %s", round, got.Status, got.StatusMessage, winner)
		}
	}
}

// A closed store refuses every call with ErrClosed; closing again is fine.
func testClosed(t *testing.T, s task.Store) {
	ctx := context.Background()
	tk := newTask("alice", t0)
	mustCreate(t, s, tk)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ops := []struct {
		name string
		op   func() error
	}{
		{"Create", func() error { return s.Create(ctx, newTask("alice", t0)) }},
		{"CreateWithin", func() error { return s.CreateWithin(ctx, newTask("alice", t0), 5) }},
		{"Get", func() error { _, err := s.Get(ctx, "alice", tk.ID); return err }},
		{"Update", func() error {
			_, err := s.Update(ctx, "alice", tk.ID, func(*task.Task) error { return nil })
			return err
		}},
		{"List", func() error { _, _, err := s.List(ctx, "alice", "", 10); return err }},
		{"CountActive", func() error { _, err := s.CountActive(ctx, "alice"); return err }},
		{"ListActive", func() error { _, _, err := s.ListActive(ctx, "", 10); return err }},
		{"Acquire", func() error { _, err := s.Acquire(ctx, "alice", tk.ID, "h", t0, time.Minute); return err }},
		{"Sweep", func() error { _, err := s.Sweep(ctx, t0, 10); return err }},
		{"BindSession", func() error { return s.BindSession(ctx, "S", "alice", time.Hour) }},
		{"CheckSession", func() error { return s.CheckSession(ctx, "S", "alice", 0) }},
		{"ForgetSession", func() error { return s.ForgetSession(ctx, "S") }},
		{"DescribeSession", func() error { return s.DescribeSession(ctx, "S", "alice", []byte("d")) }},
		{"SessionDescription", func() error { _, err := s.SessionDescription(ctx, "S", "alice"); return err }},
		{"SaveLearned", func() error { return s.SaveLearned(ctx, "k", []byte("v"), time.Hour) }},
		{"LoadLearned", func() error { _, err := s.LoadLearned(ctx, "k"); return err }},
	}
	for _, op := range ops {
		if err := op.op(); !errors.Is(err, task.ErrClosed) {
			t.Errorf("%s on a closed store: err = %v, want ErrClosed", op.name, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
