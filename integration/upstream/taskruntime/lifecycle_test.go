package taskruntime

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestExpiry: a finished task is removed when its TTL runs out ("expired"
// for one more TTL, then "not found"); an unfinished one is failed then,
// with its ttlMs extended; a negative TTL is unlimited (ttlMs null).
func TestExpiry(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
	s, url := testRuntime(t, Options{TTL: time.Minute, Now: clock.Now})
	c := newClient(t, url, true)

	done := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	c.poll(done, StatusCompleted)
	s.Hold(ToolSteps, 1)
	running := c.createTask(ToolSteps, map[string]any{"steps": 2, "stepMs": 0})
	if _, err := s.WaitTask(waitCtx(t), running, func(v TaskView) bool { return v.Held }); err != nil {
		t.Fatalf("task %s never held: %v", running, err)
	}

	clock.advance(time.Minute)
	r := c.get(done)
	if r.Error == nil || r.Error.Code != CodeInvalidParams || r.Error.Message != taskExpiredMessage {
		t.Fatalf("finished task past its TTL: %s, want -32602 %q", r.body, taskExpiredMessage)
	}
	other := newClient(t, url, true)
	other.auth = "Bearer someone else"
	if r := other.get(done); r.Error == nil || r.Error.Message != taskNotFoundMessage {
		t.Errorf("another caller learns of the expired task: %s", r.body)
	}
	got := c.get(running).Result
	if got["status"] != "failed" || got["ttlMs"] != float64(2*time.Minute/time.Millisecond) || !strings.Contains(got["statusMessage"].(string), "expired") {
		t.Fatalf("unfinished task past its TTL: %v, want failed with ttlMs 120000", got)
	}
	if e := got["error"].(map[string]any); e["code"] != float64(CodeInternalError) {
		t.Errorf("error %v", e)
	}
	s.ReleaseAll(ToolSteps)
	if v, _ := s.Task(running); v.Status != StatusFailed {
		t.Errorf("released after expiry: %s", v.Status)
	}

	clock.advance(time.Minute)
	if r := c.get(done); r.Error == nil || r.Error.Message != taskNotFoundMessage {
		t.Errorf("two TTLs later: %s, want %q", r.body, taskNotFoundMessage)
	}
	if r := c.get(running); r.Error == nil || r.Error.Message != taskExpiredMessage {
		t.Errorf("failed task past its extended TTL: %s, want %q", r.body, taskExpiredMessage)
	}

	_, url2 := testRuntime(t, Options{TTL: -1, Now: clock.Now})
	c2 := newClient(t, url2, true)
	r = c2.call(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	if v, ok := r.Result["ttlMs"]; !ok || v != nil {
		t.Fatalf("unlimited TTL: ttlMs %v (present %v), want null", v, ok)
	}
	id := r.Result["taskId"].(string)
	c2.poll(id, StatusCompleted)
	clock.advance(1000 * time.Hour)
	if r := c2.get(id); r.Error != nil {
		t.Errorf("unlimited task expired: %s", r.body)
	}
}

// TestPlainCalls: an optional tool called without the extension runs in
// the call: input by multi round-trip requests with a signed
// requestState, progress on an SSE answer, errors in-band.
func TestPlainCalls(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	c := newClient(t, url, false)
	call := func(args map[string]any, responses map[string]any, state string) *reply {
		p := map[string]any{"name": ToolInterview, "arguments": args}
		if responses != nil {
			p["inputResponses"] = responses
		}
		if state != "" {
			p["requestState"] = state
		}
		return c.request("tools/call", p, nil)
	}
	args := map[string]any{"stepMs": 0}
	r1 := call(args, nil, "")
	state1, _ := r1.Result["requestState"].(string)
	if r1.Result["resultType"] != "input_required" || !slices.Equal(keys(r1.Result["inputRequests"]), []string{"color", "name"}) || state1 == "" {
		t.Fatalf("first round %s", r1.body)
	}
	r2 := call(args, map[string]any{"name": accept(map[string]any{"name": "Bo"}), "color": accept(map[string]any{"color": "red"})}, state1)
	state2, _ := r2.Result["requestState"].(string)
	if r2.Result["resultType"] != "input_required" || !slices.Equal(keys(r2.Result["inputRequests"]), []string{"save"}) {
		t.Fatalf("second round %s", r2.body)
	}
	// The retry carries only the latest round's answer: the first round's
	// come back in requestState.
	r3 := call(args, map[string]any{"save": accept(map[string]any{"save": false})}, state2)
	if r3.Result["resultType"] != "complete" || text(r3.Result) != "Hello Bo, you like red; saved: false" {
		t.Fatalf("last round %s", r3.body)
	}
	tampered := strings.Replace(state2, ".", ".x", 1)
	if r := call(args, map[string]any{"save": accept(nil)}, tampered); r.Error == nil || r.Error.Code != CodeInvalidParams || r.status != http.StatusOK {
		t.Errorf("tampered requestState: %d %s, want in-band -32602", r.status, r.body)
	}
	if r := c.request("tools/call", map[string]any{"name": ToolEcho, "arguments": map[string]any{"text": "x"}, "requestState": state2}, nil); r.Error == nil {
		t.Errorf("requestState of another tool accepted: %s", r.body)
	}
	if n := s.TasksCreated(ToolInterview); n != 0 {
		t.Errorf("%d tasks created for plain calls", n)
	}

	// A progressToken turns the answer into SSE: one progress per step,
	// then the response (here a JSON-RPC error).
	r := c.request("tools/call", map[string]any{"name": ToolFailJob, "arguments": map[string]any{"steps": 2, "stepMs": 0}}, func(_ http.Header, b map[string]any) {
		b["params"].(map[string]any)["_meta"].(map[string]any)["progressToken"] = "p1"
	})
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") || r.header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("answer with a progressToken is %q, want SSE", r.header.Get("Content-Type"))
	}
	var progress []string
	for line := range strings.SplitSeq(string(r.body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, "notifications/progress") {
			var n struct {
				Params struct {
					ProgressToken string  `json:"progressToken"`
					Progress      float64 `json:"progress"`
					Total         float64 `json:"total"`
					Message       string  `json:"message"`
				} `json:"params"`
			}
			if err := json.Unmarshal([]byte(d), &n); err != nil {
				t.Fatalf("progress notification %s: %v", d, err)
			}
			progress = append(progress, n.Params.ProgressToken+" "+n.Params.Message)
		}
	}
	if !slices.Equal(progress, []string{"p1 step 1 of 2", "p1 step 2 of 2"}) {
		t.Errorf("progress %v", progress)
	}
	if r.Error == nil || r.Error.Code != CodeInternalError || r.Error.Message != "Simulated failure after 2 steps" {
		t.Errorf("final response %s", r.body)
	}
}

// TestRestart: with a state file, a new Server knows the tasks of the
// old one (ids, owners, holds, answers, results, expiry) and resumes the
// unfinished ones where they were.
func TestRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tasks.json")
	first, err := New(Options{StateFile: file, SweepInterval: -1, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv1 := newLoopback(t, first)
	c := newClient(t, srv1.url, true)
	c.auth = "Bearer alice"
	done := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	c.poll(done, StatusCompleted)
	first.Hold(ToolSteps, 2)
	held := c.createTask(ToolSteps, map[string]any{"steps": 3, "stepMs": 0})
	if _, err := first.WaitTask(waitCtx(t), held, func(v TaskView) bool { return v.Held }); err != nil {
		t.Fatalf("task %s never held: %v", held, err)
	}
	asking := c.createTask(ToolInterview, map[string]any{"stepMs": 0})
	c.poll(asking, StatusInputRequired)
	c.update(asking, map[string]any{"name": accept(map[string]any{"name": "Cy"})})
	cancelled := c.createTask(ToolInterview, map[string]any{"stepMs": 0})
	c.poll(cancelled, StatusInputRequired)
	srv1.close()
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second, url := testRuntime(t, Options{StateFile: file})
	c.url = url
	if got := c.get(done); got.Result["status"] != "completed" || text(got.Result["result"]) != "Completed 1 steps for steps" {
		t.Errorf("finished task after restart: %s", got.body)
	}
	if got := c.get(held); got.Result["status"] != "working" || got.Result["statusMessage"] != "step 2 of 3" {
		t.Errorf("held task after restart: %s", got.body)
	}
	if v, _ := second.Task(held); !v.Held {
		t.Errorf("hold lost in the restart: %+v", v)
	}
	got := c.get(asking)
	if got.Result["status"] != "input_required" || !slices.Equal(keys(got.Result["inputRequests"]), []string{"color"}) {
		t.Fatalf("task waiting for input after restart: %s (the kept answer must not be asked again)", got.body)
	}
	stranger := newClient(t, url, true)
	if r := stranger.get(asking); r.Error == nil {
		t.Errorf("the binding was lost in the restart: %s", r.body)
	}
	c.cancel(cancelled)
	c.poll(cancelled, StatusCancelled)
	second.Release(held)
	if got := c.poll(held, StatusCompleted); text(got["result"]) != "Completed 3 steps for steps" {
		t.Errorf("resumed task: %v", got)
	}
	c.update(asking, map[string]any{"color": accept(map[string]any{"color": "gold"})})
	c.poll(asking, StatusInputRequired)
	c.update(asking, map[string]any{"save": accept(map[string]any{"save": true})})
	if got := c.poll(asking, StatusCompleted); text(got["result"]) != "Hello Cy, you like gold; saved: true" {
		t.Errorf("resumed interview: %v", got)
	}
	if _, err := New(Options{StateFile: filepath.Join(t.TempDir(), "missing.json")}); err != nil {
		t.Errorf("a state file that does not exist yet: %v", err)
	}
}

// loopback is an httptest server that a test closes itself.
type loopback struct {
	url   string
	close func()
}

func newLoopback(t *testing.T, h http.Handler) loopback {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return loopback{url: srv.URL, close: srv.Close}
}
