package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestMcpGoClient drives the 2025-11-25 task flow with an independent client,
// mark3labs/mcp-go v1.2.1: its CallTool cannot read a CreateTaskResult, so
// the task-augmented call goes through its transport; everything else uses
// its task API.
func TestMcpGoClient(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	c, err := client.NewStreamableHttpClient(gw.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25",
		ClientInfo:      mcp.Implementation{Name: "mcp-go-e2e", Version: "1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if init.ProtocolVersion != "2025-11-25" {
		t.Fatalf("negotiated %s", init.ProtocolVersion)
	}
	raw, _ := json.Marshal(init.Capabilities)
	if !strings.Contains(string(raw), `"tasks"`) {
		t.Errorf("mcp-go sees no tasks capability: %s", raw)
	}

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) == 0 {
		t.Fatal("no tools listed")
	}

	createTask := func(id int, seconds float64) mcp.Task {
		t.Helper()
		resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: "2.0",
			ID:      mcp.NewRequestId(int64(1000 + id)),
			Method:  "tools/call",
			Params: map[string]any{
				"name":      "slow_compute",
				"arguments": map[string]any{"seconds": seconds, "label": "mcp-go"},
				"task":      map[string]any{"ttl": 60000},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Error != nil {
			t.Fatalf("task-augmented call: %+v", resp.Error)
		}
		var created struct {
			Task mcp.Task `json:"task"`
		}
		if err := json.Unmarshal(resp.Result, &created); err != nil || created.Task.TaskId == "" {
			t.Fatalf("CreateTaskResult %s: %v", resp.Result, err)
		}
		return created.Task
	}

	task := createTask(1, 1)
	got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
	if err != nil || got.TaskId != task.TaskId {
		t.Fatalf("GetTask = %+v, %v", got, err)
	}
	result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: task.TaskId}})
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Content) == 0 || !strings.Contains(mcp.GetTextFromContent(result.Content[0]), "mcp-go") {
		t.Errorf("TaskResult content = %+v", result.Content)
	}
	got, err = c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: task.TaskId}})
	if err != nil || got.Status != mcp.TaskStatusCompleted {
		t.Errorf("after the result: %+v, %v", got, err)
	}

	long := createTask(2, 60)
	cancelled, err := c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: long.TaskId}})
	if err != nil || cancelled.Status != mcp.TaskStatusCancelled {
		t.Fatalf("CancelTask = %+v, %v", cancelled, err)
	}
	if _, err := c.CancelTask(ctx, mcp.CancelTaskRequest{Params: mcp.CancelTaskParams{TaskId: long.TaskId}}); err == nil {
		t.Error("cancelling a cancelled task succeeded")
	}
	if _, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: "no-such-task"}}); err == nil {
		t.Error("GetTask of an unknown id succeeded")
	}
}
