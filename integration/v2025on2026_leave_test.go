package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A tool the 2026-07-28 runtime runs only as a task and guards (input
// asked before any task), called plainly by a 2025-11-25 client through
// the reverse bridge: the bridge calls again declaring the extension, the
// guard's rounds come to the client as elicitations on the call's stream,
// and the retry with the last answers makes the upstream's task.

// guardRetryBridge starts a runtime whose guarded tool is task-only, a
// gateway in front of it (max_active_per_principal 1), and a 2025-11-25
// client with a session that takes elicitations.
func guardRetryBridge(t *testing.T, sub string) (*taskruntime.Server, *gateway, *rpcClient) {
	t.Helper()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond,
		Modes: map[string]taskruntime.TaskMode{taskruntime.ToolGuarded: taskruntime.ModeRequired}})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: hmacAuth + "max_active_per_principal 1"})
	c := reverseClient(t, gw, sub)
	c.initialize(`{"elicitation":{"form":{}}}`)
	return rt, gw, c
}

var guardQuestions = []string{"Run the guarded job?", "Why run the guarded job?"}

// TestReverseBridgeGuardRetryTask: the task the guard's last retry makes
// is awaited within the call, which gets its result (not the upstream's
// CreateTaskResult), its slot counted until then.
func TestReverseBridgeGuardRetryTask(t *testing.T) {
	t.Parallel()
	rt, gw, alice := guardRetryBridge(t, "guard-retry")
	body, _ := jsonrpc.RequestBytes(json.RawMessage("7"), "tools/call", map[string]any{"name": taskruntime.ToolGuarded, "arguments": map[string]any{"steps": 2, "stepMs": 0}})
	final, asked := answeredStream(t, alice, body, guardAnswers)
	if final.Error != nil || !strings.Contains(string(final.Result), "Guarded job for audit: 2 steps") || !slices.Equal(asked, guardQuestions) {
		t.Fatalf("plain call through the guard: %s after %q, want the upstream task's result after %q", show(final), asked, guardQuestions)
	}
	if n := rt.TasksCreated(taskruntime.ToolGuarded); n != 1 {
		t.Fatalf("upstream guarded tasks: %d, want 1", n)
	}
	waitFor(t, 30*time.Second, "the call's slot given back", func() bool { return plainCalls(t, gw) == 0 })
}

// TestReverseBridgeGuardRetryClientLeaves: the client leaves while the
// upstream holds the CreateTaskResult of the guard's last retry; the
// bridge reads it on, counted for the caller, and cancels the task it
// names.
func TestReverseBridgeGuardRetryClientLeaves(t *testing.T) {
	t.Parallel()
	rt, gw, alice := guardRetryBridge(t, "guard-leaver")
	rounds := guardQuestions
	rt.HoldAnswers(taskruntime.ToolGuarded)
	body, _ := jsonrpc.RequestBytes(json.RawMessage("8"), "tools/call", map[string]any{"name": taskruntime.ToolGuarded, "arguments": longSteps()})
	stream := alice.open(context.Background(), body)
	for answered := 0; answered < len(rounds); {
		m := stream.next()
		switch {
		case m == nil || m.IsResponse():
			stream.close()
			t.Fatalf("the call ended before its guard's rounds were answered: %v", m)
		case m.IsRequest() && m.Method == "elicitation/create":
			var p struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(m.Params, &p)
			reply, _ := jsonrpc.ResponseBytes(m.ID, guardAnswers(p.Message))
			alice.send(reply)
			answered++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := rt.WaitTaskIDs(ctx, taskruntime.ToolGuarded, 1)
	if err != nil {
		stream.close()
		t.Fatal(err)
	}
	stream.close() // the client leaves while the answer naming the task is held
	// The task the retry made counts for the caller while it may run.
	waitFor(t, 30*time.Second, "the left call still counted", func() bool { return plainCalls(t, gw) == 1 })
	if v, _ := rt.Task(ids[0]); v.Status.Terminal() {
		t.Fatalf("upstream task ended before the answer: %s", v.Status)
	}
	rt.ReleaseAnswers(taskruntime.ToolGuarded)
	waitUpstreamCancelled(t, rt, ids[0])
	waitFor(t, 30*time.Second, "the left call's slot given back", func() bool { return plainCalls(t, gw) == 0 })
}

// TestReverseBridgeGuardedTaskCancelBeforeCreateResult: a 2025-11-25
// task-augmented call of the guarded tool becomes the gateway's task in
// input_required; its two rounds are answered on tasks/result, and the
// worker's last retry makes the upstream's task, whose CreateTaskResult
// the upstream holds. The client cancels the gateway's task meanwhile: it
// ends cancelled at once, counts until the answer comes, and then the
// task the retry made is cancelled at the upstream.
func TestReverseBridgeGuardedTaskCancelBeforeCreateResult(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: hmacAuth + "max_active_per_principal 1"})
	alice := reverseClient(t, gw, "guarded-cancel")
	alice.initialize(`{"elicitation":{"form":{}}}`)

	guarded := alice.createTask(taskruntime.ToolGuarded, longSteps(), 600000)
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"result-guarded"`), "tasks/result", map[string]string{"taskId": guarded.TaskID})
	stream := alice.open(context.Background(), body)
	defer stream.close()
	for answered := 0; answered < len(guardQuestions); {
		m := stream.next()
		switch {
		case m == nil || m.IsResponse():
			t.Fatalf("tasks/result ended before the guard's rounds were answered: %v", m)
		case m.IsRequest() && m.Method == "elicitation/create":
			var p struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(m.Params, &p)
			if answered == len(guardQuestions)-1 {
				rt.HoldAnswers(taskruntime.ToolGuarded) // the retry with this answer makes the task
			}
			reply, _ := jsonrpc.ResponseBytes(m.ID, guardAnswers(p.Message))
			alice.send(reply)
			answered++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids, err := rt.WaitTaskIDs(ctx, taskruntime.ToolGuarded, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m := alice.call("tasks/cancel", map[string]string{"taskId": guarded.TaskID}); m.Error != nil {
		t.Fatalf("tasks/cancel: %s", show(m))
	}
	if got := alice.getTask(guarded.TaskID); got.Status != "cancelled" {
		t.Fatalf("the gateway task after tasks/cancel: %+v, want cancelled", got)
	}
	if m := alice.callTool(taskruntime.ToolSteps, longSteps(), map[string]any{"ttl": 600000}); m.Error == nil || m.Error.Code != -32000 {
		t.Fatalf("a create while the guarded upstream task may run: %s, want -32000 (max_active_per_principal 1)", show(m))
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 0 {
		t.Fatalf("upstream steps tasks: %d, want 0 (refused before the upstream)", n)
	}
	rt.ReleaseAnswers(taskruntime.ToolGuarded)
	waitUpstreamCancelled(t, rt, ids[0])
	waitFor(t, 60*time.Second, "a create taken once the guarded upstream task is cancelled", func() bool {
		return alice.callTool(taskruntime.ToolSteps, map[string]any{"steps": 1, "stepMs": 0}, map[string]any{"ttl": 600000}).Error == nil
	})
}
