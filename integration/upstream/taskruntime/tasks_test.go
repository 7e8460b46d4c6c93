package taskruntime

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestTaskModes: which calls become tasks, by the tool's mode and by
// whether the request declared the extension.
//
//nolint:paralleltest,tparallel // the cases count the tasks of a tool, which two cases share
func TestTaskModes(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	tests := []struct {
		tool     string
		args     map[string]any
		tasks    bool
		want     string // resultType, or "-32021"
		wantText string // for a plain result
	}{
		{ToolSteps, map[string]any{"steps": 1, "stepMs": 0}, true, "task", ""},
		{ToolSteps, map[string]any{"steps": 1, "stepMs": 0}, false, "-32021", ""},
		{ToolInterview, nil, true, "task", ""},
		{ToolInterview, nil, false, "input_required", ""},
		{ToolFailJob, map[string]any{"kind": "tool", "stepMs": 0}, true, "task", ""},
		{ToolFailJob, map[string]any{"kind": "tool", "stepMs": 0}, false, "complete", "Job failed: simulated tool error"},
		{ToolEcho, map[string]any{"text": "hi"}, true, "complete", "echo: hi"},
		{ToolEcho, map[string]any{"text": "hi"}, false, "complete", "echo: hi"},
	}
	for _, tt := range tests {
		name := tt.tool + map[bool]string{true: " with", false: " without"}[tt.tasks] + " the extension"
		t.Run(name, func(t *testing.T) {
			before := s.TasksCreated(tt.tool)
			r := newClient(t, url, tt.tasks).call(tt.tool, tt.args)
			if tt.want == "-32021" {
				if r.status != http.StatusBadRequest || r.Error == nil || r.Error.Code != CodeMissingCapability {
					t.Fatalf("answer %d %s, want 400 -32021", r.status, r.body)
				}
				return
			}
			if r.Error != nil || r.Result["resultType"] != tt.want {
				t.Fatalf("answer %s, want resultType %q", r.body, tt.want)
			}
			if tt.wantText != "" && text(r.Result) != tt.wantText {
				t.Errorf("text %q, want %q", text(r.Result), tt.wantText)
			}
			if created := s.TasksCreated(tt.tool) - before; created != map[bool]int{true: 1, false: 0}[tt.want == "task"] {
				t.Errorf("%d tasks created", created)
			}
		})
	}
}

// TestCreateTaskResultShape: the CreateTaskResult is the flat Task with
// resultType "task", stored before it is sent.
func TestCreateTaskResultShape(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	s.Hold(ToolSteps, 1)
	c := newClient(t, url, true)
	r := c.call(ToolSteps, map[string]any{"steps": 2})
	got := keys(r.Result)
	want := []string{"createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "statusMessage", "taskId", "ttlMs"}
	if !slices.Equal(got, want) {
		t.Fatalf("CreateTaskResult fields %v, want %v (%s)", got, want, r.body)
	}
	if r.Result["status"] != "working" || r.Result["ttlMs"] != float64(DefaultTTL.Milliseconds()) || r.Result["pollIntervalMs"] != float64(10) {
		t.Errorf("CreateTaskResult %s", r.body)
	}
	id := r.Result["taskId"].(string)
	if len(id) < 22 {
		t.Errorf("task id %q has fewer than 128 bits", id)
	}
	if _, ok := s.Task(id); !ok {
		t.Error("task not stored when its CreateTaskResult arrived")
	}
	g := c.get(id)
	if g.Result["resultType"] != "complete" || g.Result["taskId"] != id {
		t.Errorf("tasks/get %s", g.body)
	}
	s.ReleaseAll(ToolSteps)
}

// TestStepsProgress: statusMessage says "step k of n" while working, and
// the result arrives inline on tasks/get.
func TestStepsProgress(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	s.Hold(ToolSteps, 3)
	c := newClient(t, url, true)
	id := c.createTask(ToolSteps, map[string]any{"steps": 6, "stepMs": 1, "label": "demo"})
	if _, err := s.WaitTask(waitCtx(t), id, func(v TaskView) bool { return v.Held }); err != nil {
		t.Fatal(err)
	}
	g := c.get(id)
	if g.Result["status"] != "working" || g.Result["statusMessage"] != "step 3 of 6" {
		t.Fatalf("held task: %s, want working with \"step 3 of 6\"", g.body)
	}
	if _, ok := g.Result["result"]; ok {
		t.Errorf("working task carries a result: %s", g.body)
	}
	if err := s.Release(id); err != nil {
		t.Fatal(err)
	}
	done := c.poll(id, StatusCompleted)
	if text(done["result"]) != "Completed 6 steps for demo" || done["statusMessage"] != "Completed" {
		t.Errorf("completed task %v", done)
	}
	if s.Gets(id) < 2 || s.Calls(ToolSteps) != 1 {
		t.Errorf("observer: %d gets, %d calls", s.Gets(id), s.Calls(ToolSteps))
	}
}

// TestInputFlow: working → input_required (two requests at once) → partial
// answer kept → working → input_required (a new key) → working →
// completed; answers to keys not outstanding are ignored.
func TestInputFlow(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	c := newClient(t, url, true)
	id := c.createTask(ToolInterview, map[string]any{"stepMs": 0})
	got := c.poll(id, StatusInputRequired)
	if k := keys(got["inputRequests"]); !slices.Equal(k, []string{"color", "name"}) {
		t.Fatalf("first round asks %v, want color and name", k)
	}
	req := got["inputRequests"].(map[string]any)["name"].(map[string]any)
	if req["method"] != "elicitation/create" || req["params"].(map[string]any)["mode"] != "form" {
		t.Errorf("input request %v", req)
	}
	if got["statusMessage"] != "waiting for input: color, name" {
		t.Errorf("statusMessage %q", got["statusMessage"])
	}

	// A partial answer plus a key never issued: the answer is kept, the
	// stranger ignored, and the task still waits for the rest.
	if r := c.update(id, map[string]any{"name": accept(map[string]any{"name": "Ada"}), "bogus": accept(nil)}); r.Error != nil || !slices.Equal(keys(r.Result), []string{"resultType"}) || r.Result["resultType"] != "complete" {
		t.Fatalf("tasks/update ack %s, want {resultType: complete}", r.body)
	}
	v, _ := s.Task(id)
	if v.Status != StatusInputRequired || !slices.Equal(v.Outstanding, []string{"color"}) || !slices.Equal(v.Answered, []string{"name"}) {
		t.Fatalf("after a partial answer: %+v", v)
	}
	if g := c.get(id); !slices.Equal(keys(g.Result["inputRequests"]), []string{"color"}) {
		t.Fatalf("tasks/get after a partial answer: %s", g.body)
	}
	// Answering name again changes nothing (not outstanding any more).
	c.update(id, map[string]any{"name": accept(map[string]any{"name": "Eve"}), "color": accept(map[string]any{"color": "teal"})})

	got = c.poll(id, StatusInputRequired, StatusCompleted)
	if k := keys(got["inputRequests"]); !slices.Equal(k, []string{"save"}) {
		t.Fatalf("second round asks %v (%v), want save", k, got)
	}
	if msg := got["inputRequests"].(map[string]any)["save"].(map[string]any)["params"].(map[string]any)["message"]; msg != "Save the profile of Ada?" {
		t.Errorf("second question %q: the first answer was not kept", msg)
	}
	c.update(id, map[string]any{"save": accept(map[string]any{"save": true})})
	done := c.poll(id, StatusCompleted)
	if want := "Hello Ada, you like teal; saved: true"; text(done["result"]) != want {
		t.Errorf("result %q, want %q", text(done["result"]), want)
	}
	if _, ok := done["inputRequests"]; ok {
		t.Error("completed task still lists inputRequests")
	}
	if s.Updates(id) != 3 {
		t.Errorf("observer counted %d updates, want 3", s.Updates(id))
	}
}

// TestTaskOutcomes: how each ending looks on tasks/get.
func TestTaskOutcomes(t *testing.T) {
	t.Parallel()
	_, url := testRuntime(t, Options{})
	tests := []struct {
		name       string
		tool       string
		args       map[string]any
		answer     map[string]any
		wantStatus Status
		wantText   string
		wantError  string
		wantMsg    string
	}{
		{"completed", ToolSteps, map[string]any{"steps": 2, "stepMs": 0}, nil, StatusCompleted, "Completed 2 steps for steps", "", "Completed"},
		{"tool error completes", ToolFailJob, map[string]any{"kind": "tool", "stepMs": 0}, nil, StatusCompleted, "Job failed: simulated tool error", "", "Completed with a tool error"},
		{"JSON-RPC error fails", ToolFailJob, map[string]any{"kind": "rpc", "steps": 1, "stepMs": 0}, nil, StatusFailed, "", "Simulated failure after 1 steps", "Tool execution failed: Simulated failure after 1 steps"},
		{"declined input completes with isError", ToolInterview, map[string]any{"stepMs": 0}, map[string]any{"name": map[string]any{"action": "decline"}, "color": map[string]any{"action": "cancel"}}, StatusCompleted, "Interview declined", "", "Completed with a tool error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, url, true)
			id := c.createTask(tt.tool, tt.args)
			if tt.answer != nil {
				c.poll(id, StatusInputRequired)
				c.update(id, tt.answer)
			}
			got := c.poll(id, StatusCompleted, StatusFailed, StatusCancelled)
			if got["status"] != string(tt.wantStatus) || got["statusMessage"] != tt.wantMsg {
				t.Fatalf("task %v, want %s with %q", got, tt.wantStatus, tt.wantMsg)
			}
			if tt.wantText != "" {
				res := got["result"].(map[string]any)
				if text(res) != tt.wantText || res["isError"] != (tt.wantMsg == "Completed with a tool error") {
					t.Errorf("result %v", res)
				}
			}
			if tt.wantError != "" {
				e := got["error"].(map[string]any)
				if e["code"] != float64(CodeInternalError) || e["message"] != tt.wantError {
					t.Errorf("error %v", e)
				}
				if _, ok := got["result"]; ok {
					t.Error("failed task carries a result")
				}
			}
		})
	}
}

// TestCancel: tasks/cancel acks with an empty result; the task turns
// cancelled (held, or waiting for input); a finished task and a task that
// ignores cancellation keep their course.
//
//nolint:paralleltest,tparallel // the test counts, after its cases, what the server saw
func TestCancel(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	c := newClient(t, url, true)
	tests := []struct {
		name  string
		start func() string
		want  Status
	}{
		{"held working task", func() string {
			s.Hold(ToolSteps, 2)
			defer s.Unhold(ToolSteps)
			id := c.createTask(ToolSteps, map[string]any{"stepMs": 0})
			if _, err := s.WaitTask(waitCtx(t), id, func(v TaskView) bool { return v.Held }); err != nil {
				t.Errorf("task %s never held: %v", id, err) // t is the parent's: no Fatal from a subtest
			}
			return id
		}, StatusCancelled},
		{"task waiting for input", func() string {
			id := c.createTask(ToolInterview, nil)
			c.poll(id, StatusInputRequired)
			return id
		}, StatusCancelled},
		{"finished task", func() string {
			id := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
			c.poll(id, StatusCompleted)
			return id
		}, StatusCompleted},
		{"task that ignores cancel", func() string {
			s.Hold(ToolSteps, 1)
			defer s.Unhold(ToolSteps)
			id := c.createTask(ToolSteps, map[string]any{"steps": 2, "stepMs": 0, "ignoreCancel": true})
			if _, err := s.WaitTask(waitCtx(t), id, func(v TaskView) bool { return v.Held }); err != nil {
				t.Errorf("task %s never held: %v", id, err) // t is the parent's: no Fatal from a subtest
			}
			return id
		}, StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.start()
			r := c.cancel(id)
			if r.status != http.StatusOK || r.Error != nil || !slices.Equal(keys(r.Result), []string{"resultType"}) {
				t.Fatalf("tasks/cancel answer %d %s, want the empty ack", r.status, r.body)
			}
			s.Release(id)
			got := c.poll(id, StatusCompleted, StatusFailed, StatusCancelled)
			if got["status"] != string(tt.want) {
				t.Errorf("after cancel: %v, want %s", got, tt.want)
			}
			if tt.want == StatusCancelled && (got["statusMessage"] != "Cancelled by request" || got["result"] != nil) {
				t.Errorf("cancelled task %v", got)
			}
			if again := c.cancel(id); again.Error != nil {
				t.Errorf("second cancel %s, want the ack", again.body)
			}
		})
	}
	if n := s.CancelRequests(ToolSteps); n != 6 {
		t.Errorf("observer counted %d cancels of steps, want 6", n)
	}
}

// TestTaskRequestErrors: unknown ids, missing input, the extension
// missing, and tasks of another caller.
//
//nolint:paralleltest,tparallel // the test counts, after its cases, what the server saw
func TestTaskRequestErrors(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	alice := newClient(t, url, true)
	alice.auth = "Bearer alice"
	id := alice.createTask(ToolInterview, map[string]any{"stepMs": 0})
	alice.poll(id, StatusInputRequired)
	bob := newClient(t, url, true)
	bob.auth = "Bearer bob"
	anonymous := newClient(t, url, true)
	plain := newClient(t, url, false)
	plain.auth = alice.auth
	tests := []struct {
		name       string
		send       func() *reply
		wantStatus int
		wantCode   int
		wantMsg    string
	}{
		{"get unknown", func() *reply { return alice.get("nope") }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"update unknown", func() *reply { return alice.update("nope", map[string]any{}) }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"cancel unknown", func() *reply { return alice.cancel("nope") }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"update without inputResponses", func() *reply {
			return alice.request("tasks/update", map[string]any{"taskId": id}, nil)
		}, 200, CodeInvalidParams, "requires inputResponses"},
		{"get by another caller", func() *reply { return bob.get(id) }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"update by another caller", func() *reply { return bob.update(id, map[string]any{"name": accept(nil)}) }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"cancel by another caller", func() *reply { return bob.cancel(id) }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"get without credentials", func() *reply { return anonymous.get(id) }, 200, CodeInvalidParams, taskNotFoundMessage},
		{"get without the extension", func() *reply { return plain.get(id) }, 400, CodeMissingCapability, missingCapabilityMessage},
		{"update without the extension", func() *reply { return plain.update(id, map[string]any{}) }, 400, CodeMissingCapability, missingCapabilityMessage},
		{"cancel without the extension", func() *reply { return plain.cancel(id) }, 400, CodeMissingCapability, missingCapabilityMessage},
		{"unknown tool", func() *reply { return alice.call("nope", nil) }, 200, CodeInvalidParams, "Unknown tool: nope"},
		{"bad arguments", func() *reply { return alice.call(ToolSteps, map[string]any{"steps": 0}) }, 200, CodeInvalidParams, "steps must be"},
		{"arguments of the wrong type", func() *reply { return alice.call(ToolSteps, map[string]any{"steps": "six"}) }, 200, CodeInvalidParams, "invalid arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.send()
			if r.status != tt.wantStatus || r.Error == nil || r.Error.Code != tt.wantCode || !strings.Contains(r.Error.Message, tt.wantMsg) {
				t.Errorf("answer %d %s, want %d with %d %q", r.status, r.body, tt.wantStatus, tt.wantCode, tt.wantMsg)
			}
		})
	}
	if n := s.ForeignLookups(); n != 4 {
		t.Errorf("observer counted %d foreign lookups, want 4", n)
	}
	if v, _ := s.Task(id); v.Status != StatusInputRequired || len(v.Answered) != 0 || v.CancelRequested {
		t.Errorf("other callers changed the task: %+v", v)
	}
	if got := alice.get(id); got.Error != nil {
		t.Errorf("the owner cannot read its task: %s", got.body)
	}
}
