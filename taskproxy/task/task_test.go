package task

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCanTransition(t *testing.T) {
	t.Parallel()
	all := []Status{StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled}
	allowed := map[[2]Status]bool{}
	for _, from := range []Status{StatusWorking, StatusInputRequired} {
		for _, to := range all {
			allowed[[2]Status{from, to}] = true
		}
	}
	for _, from := range all {
		for _, to := range all {
			want := allowed[[2]Status{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	for _, s := range all {
		if got, want := s.Terminal(), s == StatusCompleted || s == StatusFailed || s == StatusCancelled; got != want {
			t.Errorf("%s.Terminal() = %v", s, got)
		}
	}
}

func TestSetStatus(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	task := &Task{Status: StatusWorking}
	if err := task.SetStatus(StatusInputRequired, "need input", now); err != nil {
		t.Fatal(err)
	}
	if task.StatusMessage != "need input" || !task.UpdatedAt.Equal(now) {
		t.Errorf("SetStatus did not record message and time: %+v", task)
	}
	if err := task.SetStatus(StatusCancelled, "", now); err != nil {
		t.Fatal(err)
	}
	if err := task.SetStatus(StatusWorking, "", now); !errors.Is(err, ErrBadTransition) {
		t.Errorf("cancelled -> working: err = %v, want ErrBadTransition", err)
	}
}

func TestInputs(t *testing.T) {
	t.Parallel()
	task := &Task{}
	k1 := task.AddInput(InputRequest{Method: "elicitation/create"})
	k2 := task.AddInput(InputRequest{Method: "sampling/createMessage"})
	if k1 == k2 {
		t.Fatalf("keys reused: %q", k1)
	}
	in, _ := task.Input(k1)
	in.Answered = true
	if out := task.Outstanding(); len(out) != 1 || out[0].Key != k2 {
		t.Errorf("Outstanding = %+v, want only %s", out, k2)
	}
	c := task.Clone()
	c.Inputs[1].Answered = true
	if task.Inputs[1].Answered {
		t.Error("Clone shares the inputs slice")
	}
}

func TestNewTaskID(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 10000 { // a leading "-" came once in 64 ids before it was ruled out
		id := NewTaskID()
		if strings.HasPrefix(id, "-") {
			t.Fatalf("id %q begins with a dash: a command line takes it for a flag", id)
		}
		if len(id) != 22 {
			t.Fatalf("id %q has %d characters, want 22 (128 bits)", id, len(id))
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		if strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			t.Fatalf("id %q is not URL-safe", id)
		}
	}
}

// Status changes are recorded for operators, bounded, and copied by Clone.
func TestStatusHistory(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	task := &Task{Status: StatusWorking}
	if err := task.SetStatus(StatusWorking, "still working", at(1)); err != nil {
		t.Fatal(err)
	}
	if len(task.History) != 0 {
		t.Fatalf("a message-only update was recorded as a change: %+v", task.History)
	}
	_ = task.SetStatus(StatusInputRequired, "need input", at(2))
	c := task.Clone()
	_ = task.SetStatus(StatusCompleted, "", at(3))
	want := []StatusChange{
		{From: StatusWorking, To: StatusInputRequired, Message: "need input", At: at(2)},
		{From: StatusInputRequired, To: StatusCompleted, At: at(3)},
	}
	if len(task.History) != len(want) {
		t.Fatalf("History = %+v, want %+v", task.History, want)
	}
	for i := range want {
		if task.History[i] != want[i] {
			t.Errorf("History[%d] = %+v, want %+v", i, task.History[i], want[i])
		}
	}
	if len(c.History) != 1 {
		t.Errorf("a clone taken before the last change has %d changes, want 1", len(c.History))
	}

	long := &Task{Status: StatusWorking}
	for i := range 1000 {
		to := StatusInputRequired
		if i%2 == 1 {
			to = StatusWorking
		}
		_ = long.SetStatus(to, "", at(i))
	}
	if len(long.History) != maxHistory {
		t.Fatalf("after 1000 changes History has %d entries, want %d", len(long.History), maxHistory)
	}
	if first := long.History[0]; !first.At.Equal(at(0)) {
		t.Errorf("first change kept = %+v, want the one at 0", first)
	}
	if last := long.History[maxHistory-1]; !last.At.Equal(at(999)) {
		t.Errorf("last change = %+v, want the one at 999", last)
	}
	for i := 2; i < maxHistory; i++ {
		if !long.History[i].At.After(long.History[i-1].At) {
			t.Fatalf("History out of order at %d: %+v", i, long.History)
		}
	}
}

// A re-run is recorded in the history even when the task was working
// already, from input_required too; it is the status message while it
// runs, and an ended task is not re-run.
func TestRerun(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	for _, c := range []struct {
		from Status
		ok   bool
	}{
		{StatusWorking, true},
		{StatusInputRequired, true},
		{StatusCompleted, false},
		{StatusFailed, false},
		{StatusCancelled, false},
	} {
		t.Run(string(c.from), func(t *testing.T) {
			t.Parallel()
			tk := &Task{Status: c.from, StatusMessage: "before"}
			err := tk.Rerun("re-running", at(5))
			if !c.ok {
				if !errors.Is(err, ErrBadTransition) || tk.Status != c.from || len(tk.History) != 0 {
					t.Errorf("re-run of a %s task: %v, now %s with history %+v; want ErrBadTransition and no change", c.from, err, tk.Status, tk.History)
				}
				return
			}
			want := StatusChange{From: c.from, To: StatusWorking, Message: "re-running", At: at(5)}
			if err != nil || tk.Status != StatusWorking || tk.StatusMessage != "re-running" || !tk.UpdatedAt.Equal(at(5)) ||
				len(tk.History) != 1 || tk.History[0] != want {
				t.Errorf("re-run of a %s task: %v, now %s %q at %v, history %+v; want working with the message and %+v", c.from, err, tk.Status, tk.StatusMessage, tk.UpdatedAt, tk.History, want)
			}
		})
	}
}
