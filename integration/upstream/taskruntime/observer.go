package taskruntime

import (
	"context"
	"fmt"
)

// counters record what the runtime saw, for tests. They are not persisted:
// a restarted runtime counts from zero.
type counters struct {
	calls      map[string]int // tools/call per tool that reached the tool
	created    map[string]int // tasks created per tool
	requests   map[string]int // requests per method that passed validation
	rejections map[int]int    // error answers per JSON-RPC code
	cancels    map[string]int // tasks/cancel per tool of the task
	gets       map[string]int // tasks/get per task id
	updates    map[string]int // tasks/update per task id
	foreign    int            // task requests refused because the caller is not the owner
}

func (c *counters) init() {
	c.calls, c.created, c.requests = map[string]int{}, map[string]int{}, map[string]int{}
	c.rejections, c.cancels = map[int]int{}, map[string]int{}
	c.gets, c.updates = map[string]int{}, map[string]int{}
}

// count records an error answer and returns it.
func (s *Server) count(e *rpcError) *rpcError {
	s.mu.Lock()
	s.obs.rejections[e.Code]++
	s.mu.Unlock()
	return e
}

func (s *Server) read(f func() int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return f()
}

// Calls reports how many tools/call requests reached tool (each round of a
// multi round-trip call counts; a call that became a task counts once).
func (s *Server) Calls(tool string) int { return s.read(func() int { return s.obs.calls[tool] }) }

// TasksCreated reports how many tasks of tool were created.
func (s *Server) TasksCreated(tool string) int {
	return s.read(func() int { return s.obs.created[tool] })
}

// Requests reports how many requests of method passed validation.
func (s *Server) Requests(method string) int {
	return s.read(func() int { return s.obs.requests[method] })
}

// Rejections reports how many answers carried JSON-RPC error code (header
// mismatches are CodeHeaderMismatch, and so on).
func (s *Server) Rejections(code int) int {
	return s.read(func() int { return s.obs.rejections[code] })
}

// CancelRequests reports how many tasks/cancel requests named a task of
// tool.
func (s *Server) CancelRequests(tool string) int {
	return s.read(func() int { return s.obs.cancels[tool] })
}

// Gets reports how many tasks/get requests read task id.
func (s *Server) Gets(id string) int { return s.read(func() int { return s.obs.gets[id] }) }

// Updates reports how many tasks/update requests named task id.
func (s *Server) Updates(id string) int { return s.read(func() int { return s.obs.updates[id] }) }

// ForeignLookups reports how many task requests named an existing task of
// another caller (answered as not found).
func (s *Server) ForeignLookups() int { return s.read(func() int { return s.obs.foreign }) }

// Task returns the current state of task id.
func (s *Server) Task(id string) (TaskView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return TaskView{}, false
	}
	return t.view(), true
}

// TaskIDs lists the ids of tool's tasks (every tool's when tool is empty),
// oldest first.
func (s *Server) TaskIDs(tool string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taskIDsLocked(tool)
}

func (s *Server) taskIDsLocked(tool string) []string {
	var ids []string
	for _, id := range s.order {
		if t, ok := s.tasks[id]; ok && (tool == "" || t.Tool == tool) {
			ids = append(ids, id)
		}
	}
	return ids
}

// WaitTask blocks until cond holds for task id, and returns the task as it
// was then.
func (s *Server) WaitTask(ctx context.Context, id string, cond func(TaskView) bool) (TaskView, error) {
	for {
		s.mu.Lock()
		t, ok := s.tasks[id]
		changed := s.changed
		var v TaskView
		if ok {
			v = t.view()
		}
		s.mu.Unlock()
		if ok && cond(v) {
			return v, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return v, fmt.Errorf("waiting for task %s (now %s %q): %w", id, v.Status, v.StatusMessage, ctx.Err())
		}
	}
}

// WaitTaskIDs blocks until tool has at least n tasks, and returns their
// ids, oldest first.
func (s *Server) WaitTaskIDs(ctx context.Context, tool string, n int) ([]string, error) {
	for {
		s.mu.Lock()
		ids, changed := s.taskIDsLocked(tool), s.changed
		s.mu.Unlock()
		if len(ids) >= n {
			return ids, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ids, fmt.Errorf("waiting for %d tasks of %q (have %d): %w", n, tool, len(ids), ctx.Err())
		}
	}
}

// WaitGets blocks until task id has been read by at least n tasks/get
// requests: a test that holds a task uses it to know a client has seen
// the held state.
func (s *Server) WaitGets(ctx context.Context, id string, n int) error {
	for {
		s.mu.Lock()
		got, changed := s.obs.gets[id], s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d reads of task %s (saw %d): %w", n, id, got, ctx.Err())
		}
	}
}

// Hold makes tasks of tool created from now on pause when they reach step
// (step ≥ 1): their statusMessage says "step <step> of n" and stays so
// until [Server.Release]. The hold is part of the task and survives a
// restart with a state file.
func (s *Server) Hold(tool string, step int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds[tool] = step
}

// Unhold stops holding tasks of tool created from now on; tasks that carry
// a hold already keep it.
func (s *Server) Unhold(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holds, tool)
}

// Release lets task id go on past its hold (or never stop there, if it has
// not reached it yet).
func (s *Server) Release(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return fmt.Errorf("releasing task %s: no such task", id)
	}
	t.HoldAt, t.Held = nil, false
	s.changedLocked(t)
	return nil
}

// ReleaseAll releases every task of tool (every tool's when tool is
// empty).
func (s *Server) ReleaseAll(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.taskIDsLocked(tool) {
		t := s.tasks[id]
		t.HoldAt, t.Held = nil, false
	}
	s.changedLocked(nil)
}

// HoldAnswers holds back the CreateTaskResult of tasks of tool created
// from now on: the task is created and runs, but the tools/call that made
// it is answered only at [Server.ReleaseAnswers] (or when its client
// closes the request). It is how a runtime slow to answer a call looks.
func (s *Server) HoldAnswers(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.answerHolds[tool]; !ok {
		s.answerHolds[tool] = make(chan struct{})
	}
}

// ReleaseAnswers sends the CreateTaskResults of tool held back so far,
// and stops holding new ones.
func (s *Server) ReleaseAnswers(tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.answerHolds[tool]; ok {
		close(ch)
		delete(s.answerHolds, tool)
	}
}

// holdAnswer waits, before a CreateTaskResult of tool goes out, while
// answers of tool are held.
func (s *Server) holdAnswer(x *exchange, tool string) {
	s.mu.Lock()
	ch, ok := s.answerHolds[tool]
	s.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-ch:
	case <-x.r.Context().Done():
	case <-s.root.Done():
	}
}
