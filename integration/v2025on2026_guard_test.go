package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// guardElicitations answers the task runtime's guarded tool as a user of
// mark3labs/mcp-go would: confirm, then "audit" as the reason; it keeps
// the messages it was asked.
type guardElicitations struct {
	mu    sync.Mutex
	asked []string
}

func (g *guardElicitations) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	g.mu.Lock()
	g.asked = append(g.asked, req.Params.Message)
	g.mu.Unlock()
	content := map[string]any{"reason": "audit"}
	if strings.Contains(req.Params.Message, "Run the guarded job?") {
		content = map[string]any{"confirm": true}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
}

func (g *guardElicitations) messages() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.asked)
}

// TestReverseBridgeGuardedInput: a 2026-07-28 runtime whose discovery
// lists only 2026-07-28 although it answers a 2025-11-25 initialize (as
// FastMCP 4's does) is served to 2025-11-25 clients through the reverse
// bridge, and the bridge carries its guard pattern: input_required before
// any task. A task-augmented call of the guarded tool becomes the
// gateway's 2025-11-25 task in input_required; mcp-go gets each round's
// elicitation/create on tasks/result, answers, and after two rounds gets
// the upstream task's result. A plain call through the guard asks on the
// call's own stream.
func TestReverseBridgeGuardedInput(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond, AcceptV2025Initialize: true})
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"), Directives: hmacAuth})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	auth := "Bearer " + hmacToken(t, "alice", "t1")
	tr, err := transport.NewStreamableHTTP(gw.URL, transport.WithHTTPHeaders(map[string]string{"Authorization": auth}))
	if err != nil {
		t.Fatal(err)
	}
	answers := &guardElicitations{}
	c := client.NewClient(tr, client.WithElicitationHandler(answers), client.WithProtocolVersion("2025-11-25"))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	init, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25",
		ClientInfo:      mcp.Implementation{Name: "mcp-go-guard", Version: "1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != "2025-11-25" || !strings.HasPrefix(c.GetSessionId(), "mcp-tasks-v2026.") {
		t.Fatalf("initialize: version %s, session %q: want the reverse bridge's 2025-11-25 session", init.ProtocolVersion, c.GetSessionId())
	}
	if n := rt.Requests("initialize"); n != 0 {
		t.Errorf("the runtime answered %d initializes: the gateway should serve 2025-11-25 clients itself, as discovery lists 2026-07-28 only", n)
	}
	args := map[string]any{"steps": 2, "stepMs": 0}

	// A task-augmented call: the runtime asks before making its task.
	resp, err := tr.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(int64(100)), Method: "tools/call",
		Params: map[string]any{"name": taskruntime.ToolGuarded, "arguments": args, "task": map[string]any{"ttl": 60000}}})
	if err != nil || resp.Error != nil {
		t.Fatalf("task-augmented call: %v %+v", err, resp)
	}
	var created struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task.TaskId == "" {
		t.Fatalf("CreateTaskResult %s: %v", resp.Result, err)
	}
	id := created.Task.TaskId
	var waiting *mcp.GetTaskResult
	waitFor(t, 30*time.Second, "the task in input_required", func() bool {
		got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if got.Status.IsTerminal() {
			t.Fatalf("the task ended %s before its input: %+v", got.Status, got.Task)
		}
		waiting = got
		return got.Status == mcp.TaskStatusInputRequired
	})
	if !strings.Contains(waiting.StatusMessage, "tasks/result") {
		t.Errorf("statusMessage %q: want the 2025-11-25 way to answer (tasks/result)", waiting.StatusMessage)
	}
	if n := rt.TasksCreated(taskruntime.ToolGuarded); n != 0 {
		t.Errorf("the runtime made %d tasks before its guard was answered", n)
	}
	result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: id}})
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	want := "Guarded job for audit: 2 steps"
	if len(result.Content) == 0 || mcp.GetTextFromContent(result.Content[0]) != want || result.IsError {
		t.Errorf("tasks/result: %+v, want %q", result, want)
	}
	guardRounds := []string{"Run the guarded job?", "Why run the guarded job?"}
	if got := answers.messages(); !slices.Equal(got, guardRounds) {
		t.Errorf("elicitations on tasks/result: %q, want %q", got, guardRounds)
	}
	if got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}); err != nil || got.Status != mcp.TaskStatusCompleted {
		t.Errorf("after the result: %+v %v, want completed", got, err)
	}
	if calls, tasks := rt.Calls(taskruntime.ToolGuarded), rt.TasksCreated(taskruntime.ToolGuarded); calls != 3 || tasks != 1 {
		t.Errorf("the runtime saw %d calls and made %d tasks, want 3 (two guard rounds, then the task) and 1", calls, tasks)
	}

	// A plain call through the guard: the rounds come on its own stream.
	plain, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: taskruntime.ToolGuarded, Arguments: args}})
	if err != nil {
		t.Fatalf("plain call: %v", err)
	}
	if len(plain.Content) == 0 || mcp.GetTextFromContent(plain.Content[0]) != want || plain.IsError {
		t.Errorf("plain call: %+v, want %q", plain, want)
	}
	if got := answers.messages(); !slices.Equal(got, append(slices.Clone(guardRounds), guardRounds...)) {
		t.Errorf("elicitations after the plain call: %q", got)
	}
	if tasks := rt.TasksCreated(taskruntime.ToolGuarded); tasks != 1 {
		t.Errorf("the plain call made a task upstream (%d in all)", tasks)
	}
}

// guardAnswers answers the guarded tool's rounds on a raw client.
func guardAnswers(message string) any {
	if strings.Contains(message, "Run the guarded job?") {
		return map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	return map[string]any{"action": "accept", "content": map[string]any{"reason": "audit"}}
}

// TestReverseBridgeGuardedRestart: a gateway restarted while its
// 2025-11-25 task waits for input the upstream asked before making its
// task resumes it from the store: the question is relayed again on
// tasks/result, and the answers go upstream as the call's retry, with the
// recorded requestState.
func TestReverseBridgeGuardedRestart(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "store")
	// Bound to no header: after the restart the gateway calls without the
	// caller's Authorization (it stores no credentials).
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond, BindHeader: "-"})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: hmacAuth})
	alice := reverseClient(t, gw, "alice")
	alice.initialize(`{"elicitation":{"form":{}}}`)

	guarded := alice.createTask(taskruntime.ToolGuarded, map[string]any{"steps": 2, "stepMs": 0}, 60000)
	waitFor(t, 30*time.Second, "input_required", func() bool { return alice.getTask(guarded.TaskID).Status == "input_required" })
	killGateway(t, gw)
	gw2 := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: store, Directives: hmacAuth})
	alice.url = gw2.URL
	// A task resumes once its route serves a request after the restart,
	// counted from when the restarted gateway found the task: a client
	// waiting on tasks/result sends none, so another request of the
	// session's comes now and then, as a client polling tasks/get would.
	stop := pingWhile(t, gw2.URL, alice.header.Get("Authorization"), alice.session)
	final, asked := taskResult(t, alice, guarded.TaskID, guardAnswers)
	stop()
	if got := textOf(t, final); got != "Guarded job for audit: 2 steps" || !slices.Equal(asked, []string{"Run the guarded job?", "Why run the guarded job?"}) {
		t.Errorf("the guarded task after the restart: %q after %q", got, asked)
	}
	if got := alice.getTask(guarded.TaskID); got.Status != "completed" {
		t.Errorf("tasks/get after the result: %+v", got)
	}
	if calls, tasks := rt.Calls(taskruntime.ToolGuarded), rt.TasksCreated(taskruntime.ToolGuarded); calls != 3 || tasks != 1 {
		t.Errorf("the runtime saw %d calls and made %d tasks, want 3 and 1", calls, tasks)
	}
}

// pingWhile sends a ping on session every 100 ms until the returned stop
// is called.
func pingWhile(t *testing.T, url, auth, session string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, _ := jsonrpc.RequestBytes(json.RawMessage(`"ping"`), "ping", nil)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Authorization", auth)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			if resp, err := httpClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(cancel)
	return func() {
		cancel()
		<-done
	}
}
