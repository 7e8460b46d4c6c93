package taskruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// work is what a tool's code runs against: the same tool runs as a task or
// inside a plain call, and only these two primitives differ.
type work interface {
	// step reports that step k of n has begun, then spends d on it.
	step(k, n int, d time.Duration) error
	// ask returns the answers to reqs (input key → InputRequest), getting
	// from the client those it does not have yet.
	ask(reqs map[string]any) (map[string]json.RawMessage, error)
}

// Why a task's work stopped early (the cause of its context).
var (
	errCancelled = errors.New("task cancelled by tasks/cancel")
	errExpired   = errors.New("task expired")
	errClosing   = errors.New("runtime closing")
)

// taskWork runs a tool as a task. It replays: after a restart the tool
// runs again from the start, and steps already passed and questions
// already answered return at once.
type taskWork struct {
	s   *Server
	id  string
	ctx context.Context
}

func (w *taskWork) step(k, n int, d time.Duration) error {
	s := w.s
	s.mu.Lock()
	t := s.tasks[w.id]
	if t == nil {
		s.mu.Unlock()
		return w.stopped()
	}
	if t.Step > k { // replaying a step passed before a restart
		s.mu.Unlock()
		return nil
	}
	if t.Step < k {
		t.Step, t.Steps = k, n
		t.StatusMessage = fmt.Sprintf("step %d of %d", k, n)
		if t.HoldAt != nil && *t.HoldAt == k {
			t.Held = true
		}
		s.changedLocked(t)
	}
	s.mu.Unlock()
	if err := w.waitFor(func(t *record) bool { return !t.Held }); err != nil {
		return err
	}
	select {
	case <-time.After(d):
		return nil
	case <-w.ctx.Done():
		return context.Cause(w.ctx)
	}
}

func (w *taskWork) ask(reqs map[string]any) (map[string]json.RawMessage, error) {
	s := w.s
	keys := sortedKeys(reqs)
	s.mu.Lock()
	t := s.tasks[w.id]
	if t == nil {
		s.mu.Unlock()
		return nil, w.stopped()
	}
	var waiting []string
	for _, k := range keys {
		if _, ok := t.Answers[k]; ok {
			continue
		}
		waiting = append(waiting, k)
		if !slices.Contains(t.Issued, k) {
			raw, err := json.Marshal(reqs[k])
			if err != nil {
				s.mu.Unlock()
				return nil, fmt.Errorf("encoding input request %s: %w", k, err)
			}
			if t.Outstanding == nil {
				t.Outstanding = map[string]json.RawMessage{}
			}
			t.Outstanding[k] = raw
			t.Issued = append(t.Issued, k)
		}
	}
	if len(waiting) > 0 && t.Status == StatusWorking {
		t.Status = StatusInputRequired
		t.StatusMessage = "waiting for input: " + strings.Join(waiting, ", ")
		s.changedLocked(t)
	}
	s.mu.Unlock()
	var answers map[string]json.RawMessage
	err := w.waitFor(func(t *record) bool {
		for _, k := range keys {
			if _, ok := t.Answers[k]; !ok {
				return false
			}
		}
		answers = make(map[string]json.RawMessage, len(keys))
		for _, k := range keys {
			answers[k] = t.Answers[k]
		}
		return true
	})
	return answers, err
}

// waitFor blocks until done holds for the task (checked under s.mu) or the
// work is stopped.
func (w *taskWork) waitFor(done func(*record) bool) error {
	s := w.s
	for {
		s.mu.Lock()
		t, changed := s.tasks[w.id], s.changed
		ok := t != nil && done(t)
		s.mu.Unlock()
		if t == nil {
			return w.stopped()
		}
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-w.ctx.Done():
			return context.Cause(w.ctx)
		}
	}
}

// stopped is the error for work whose task is gone or past the step the
// work is at (it was removed or finished elsewhere).
func (w *taskWork) stopped() error {
	if err := context.Cause(w.ctx); err != nil {
		return err
	}
	return errExpired
}

// start runs a task's work in the background. Called with s.mu held.
func (s *Server) start(t *record) {
	if s.root.Err() != nil { // closed: the task resumes when the state file is loaded again
		return
	}
	ctx, stop := context.WithCancelCause(s.root)
	s.stops[t.ID] = stop
	if t.CancelRequested && !t.IgnoresCancel { // acknowledged before a restart
		stop(errCancelled)
	}
	spec := s.tools[t.Tool]
	args := t.Args
	s.wg.Add(1)
	delay := s.pickupDelay
	go func() {
		defer s.wg.Done()
		defer stop(nil)
		if delay > 0 { // not picked up yet: the task says working
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-ctx.Done(): // the work notices at its first step
			}
			timer.Stop()
		}
		res, err := spec.run(&taskWork{s: s, id: t.ID, ctx: ctx}, args)
		s.finish(t.ID, res, err, context.Cause(ctx))
	}()
}

// finish records how a task's work ended. Work stopped because the runtime
// is closing leaves the task as it is, to resume from the state file.
func (s *Server) finish(id string, res map[string]any, err, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.stops, id)
	t := s.tasks[id]
	if t == nil || t.Status.Terminal() || errors.Is(cause, errClosing) {
		return
	}
	t.Held = false
	t.Outstanding = nil
	var rpcErr *rpcError
	switch {
	case errors.Is(err, errCancelled) || errors.Is(cause, errCancelled):
		t.Status, t.StatusMessage = StatusCancelled, "Cancelled by request"
	case errors.As(err, &rpcErr):
		t.Status, t.StatusMessage = StatusFailed, "Tool execution failed: "+rpcErr.Message
		t.Error = rpcErr
	case err != nil:
		t.Status, t.StatusMessage = StatusFailed, "Tool execution failed: "+err.Error()
		t.Error = &rpcError{Code: CodeInternalError, Message: err.Error()}
	default:
		raw, mErr := json.Marshal(res)
		if mErr != nil {
			t.Status, t.Error = StatusFailed, &rpcError{Code: CodeInternalError, Message: mErr.Error()}
			break
		}
		t.Status, t.Result = StatusCompleted, raw
		t.StatusMessage = "Completed"
		if isErr, _ := res["isError"].(bool); isErr {
			t.StatusMessage = "Completed with a tool error"
		}
	}
	s.changedLocked(t)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
