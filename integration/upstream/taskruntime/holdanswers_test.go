package taskruntime

import (
	"testing"
)

// TestHoldAnswers: with the answers of steps held, a call creates its
// task, which runs, but is answered only once the answers are released;
// later calls are answered at once.
func TestHoldAnswers(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	c := newClient(t, url, true)
	s.HoldAnswers(ToolSteps)
	answered := make(chan string, 1)
	go func() { answered <- c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0}) }()
	ids, err := s.WaitTaskIDs(waitCtx(t), ToolSteps, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitTask(waitCtx(t), ids[0], func(v TaskView) bool { return v.Status.Terminal() }); err != nil {
		t.Fatalf("the held call's task did not run: %v", err)
	}
	select {
	case id := <-answered:
		t.Fatalf("the call was answered (%s) while answers were held", id)
	default:
	}
	s.ReleaseAnswers(ToolSteps)
	if id := <-answered; id != ids[0] {
		t.Fatalf("released answer names %s, want %s", id, ids[0])
	}
	if id := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0}); id == "" {
		t.Fatal("a call after the release was not answered with its task")
	}
}
