package integration

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// TestTaskRuntimeExtTasksClient drives the 2026-07-28 task runtime fixture
// directly (no gateway) with the official requester: it creates tasks and
// polls them to completion, sees "step k of n" while one works, answers
// input requests over two rounds, gets a failed and a tool-error task,
// cancels one, and, as a client without the extension, is refused the
// required tool and served the optional one plainly.
func TestTaskRuntimeExtTasksClient(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	// Hold the first steps task at step 2; the client releases it through
	// the observer API once it has read it there, so that the status
	// message it reports is certain.
	rt.Hold(taskruntime.ToolSteps, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	out := runTaskRuntimeClient(t, url, "full", taskRuntimeControlURL(url))
	for _, want := range []string{
		"ERA modern",
		"TOOLS steps,interview,echo,fail_job",
		"steps KIND task OUTCOME completed", "Completed 4 steps for ts",
		`INPUT color elicitation "What is your favourite colour?"`,
		`INPUT name elicitation "What is your name?"`,
		`INPUT save elicitation "Save the profile of Lin?"`,
		"interview KIND task OUTCOME completed", "Hello Lin, you like green; saved: true",
		`interview STATUS MESSAGES ["Task created"`, "waiting for input: color, name",
		"fail_job ERROR -32603 Simulated failure after 1 steps",
		"fail_job KIND task OUTCOME completed", `"text":"Job failed: simulated tool error"}],"isError":true`,
		`echo KIND immediate OUTCOME completed`, "echo: hi",
		"CANCEL KIND task",
		"LIB MCP-NAME tasks/cancel,tasks/get,tasks/update",
		"PLAIN steps ERROR -32021",
		`PLAIN fail_job RESULT`, "Job failed: simulated tool error",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client output lacks %q", want)
		}
	}
	// Only the held step is certain to be seen; the others may pass
	// between two polls.
	if !regexp.MustCompile(`steps STATUS MESSAGES \[[^\n]*"step 2 of 4"`).MatchString(out) {
		t.Error(`the client never saw "step 2 of 4" while the task was held there`)
	}
	m := regexp.MustCompile(`CANCEL KIND task TASK (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("the client reported no cancelled task")
	}
	if v, err := rt.WaitTask(ctx, m[1], func(v taskruntime.TaskView) bool { return v.Status.Terminal() }); err != nil || v.Status != taskruntime.StatusCancelled {
		t.Errorf("cancelled task is %s (%v), want cancelled", v.Status, err)
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"steps tasks", rt.TasksCreated(taskruntime.ToolSteps), 2},
		{"interview tasks", rt.TasksCreated(taskruntime.ToolInterview), 1},
		{"fail_job tasks", rt.TasksCreated(taskruntime.ToolFailJob), 2},
		{"echo tasks", rt.TasksCreated(taskruntime.ToolEcho), 0},
		{"cancels of steps", rt.CancelRequests(taskruntime.ToolSteps), 1},
		{"header mismatches", rt.Rejections(taskruntime.CodeHeaderMismatch), 0},
		{"-32021 answers", rt.Rejections(taskruntime.CodeMissingCapability), 1},
		{"discover requests", min(rt.Requests("server/discover"), 1), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
}

// TestTaskRuntimeProcessRestart runs the fixture as a process with a state
// file, kills it with SIGKILL while a task is held and another waits for
// input, and starts it again: both tasks are still there, bound to their
// caller, and finish.
func TestTaskRuntimeProcessRestart(t *testing.T) {
	t.Parallel()
	proc := startTaskRuntimeProcess(t, t.TempDir()+"/tasks.json", "-hold", "steps=2")
	c := newTaskRuntimeClient(proc.URL, "Bearer carol")
	held := c.mustCreate(t, taskruntime.ToolSteps, map[string]any{"steps": 3, "stepMs": 0})
	waitFor(t, 30*time.Second, "the task to be held", func() bool { return proc.task(t, held).Held })
	asking := c.mustCreate(t, taskruntime.ToolInterview, map[string]any{"stepMs": 0})
	waitFor(t, 30*time.Second, "the interview to ask", func() bool { return proc.task(t, asking).Status == taskruntime.StatusInputRequired })
	if r := c.send(t, "tasks/update", map[string]any{"taskId": asking, "inputResponses": map[string]any{"name": accepted("name", "Kim")}}); r.Error != nil {
		t.Fatalf("tasks/update: %s", r.raw)
	}

	proc.restart(t)
	if got := c.get(t, held); got.Result["status"] != "working" || got.Result["statusMessage"] != "step 2 of 3" {
		t.Errorf("held task after SIGKILL and restart: %s", got.raw)
	}
	if got := newTaskRuntimeClient(proc.URL, "Bearer mallory").get(t, held); got.Error == nil || got.Error.Code != -32602 {
		t.Errorf("another caller reads the task after the restart: %s", got.raw)
	}
	proc.control(t, http.MethodPost, "/release?task="+held)
	waitFor(t, 30*time.Second, "the released task to complete", func() bool {
		return c.get(t, held).Result["status"] == "completed"
	})
	if got := c.get(t, asking); !strings.Contains(got.raw, `"inputRequests":{"color":`) || strings.Contains(got.raw, `"name":{`) {
		t.Errorf("interview after restart: %s, want only the colour still asked", got.raw)
	}
	c.send(t, "tasks/update", map[string]any{"taskId": asking, "inputResponses": map[string]any{"color": accepted("color", "plum")}})
	waitFor(t, 30*time.Second, "the second round", func() bool {
		return strings.Contains(c.get(t, asking).raw, `"save":{`)
	})
	c.send(t, "tasks/update", map[string]any{"taskId": asking, "inputResponses": map[string]any{"save": accepted("save", true)}})
	waitFor(t, 30*time.Second, "the interview to complete", func() bool {
		return strings.Contains(c.get(t, asking).raw, "Hello Kim, you like plum; saved: true")
	})
}
