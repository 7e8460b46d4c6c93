package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The 2025-11-25 task flows against the official TypeScript
// everything server: tools it runs plainly (and forbids as tasks) become
// the gateway's tasks; their elicitation and sampling requests reach the
// client on the gateway's tasks/result stream and the client's answers
// (POSTed JSON-RPC responses) reach the server; a cancel stops the call.

// resultStream opens tasks/result for the task and answers each request
// that arrives on it with answer(method); it returns the final response and
// the methods of the requests answered.
func resultStream(t *testing.T, c *rpcClient, taskID string, answer func(method string) any) (*jsonrpc.Message, []string) {
	t.Helper()
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"result-1"`), "tasks/result", map[string]string{"taskId": taskID})
	stream := c.open(context.Background(), body)
	defer stream.close()
	var asked []string
	for {
		m := stream.next()
		if m == nil {
			t.Fatal("tasks/result stream ended without the result")
		}
		switch {
		case m.IsRequest():
			if !strings.Contains(string(m.Params), taskID) {
				t.Errorf("%s params %s: want the gateway's related task %s", m.Method, m.Params, taskID)
			}
			asked = append(asked, m.Method)
			res, _ := jsonrpc.ResponseBytes(m.ID, answer(m.Method))
			if code := c.send(res); code != http.StatusAccepted {
				t.Fatalf("answering %s: HTTP %d", m.Method, code)
			}
		case m.IsResponse():
			return m, asked
		}
	}
}

func TestTSEverythingV2025Tasks(t *testing.T) {
	t.Parallel()
	gw, _ := tsEverythingGateway(t, "")
	checkNoRace(t, gw)
	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{},"sampling":{}}`)

	t.Run("trigger-elicitation-request as a task answered on tasks/result", func(t *testing.T) {
		task := c.createTask("trigger-elicitation-request", map[string]any{}, 120000)
		waitStatus(t, c, task.TaskID, "input_required", 60*time.Second)
		final, asked := resultStream(t, c, task.TaskID, func(string) any { return elicitAnswer })
		if len(asked) != 1 || asked[0] != "elicitation/create" {
			t.Errorf("requests on tasks/result = %v, want one elicitation/create", asked)
		}
		if final.Error != nil || !strings.Contains(string(final.Result), "Name: Bridget") {
			t.Errorf("tasks/result = %s / %+v, want the answer in the result", final.Result, final.Error)
		}
		if got := c.getTask(task.TaskID); got.Status != "completed" {
			t.Errorf("task = %+v, want completed", got)
		}
	})

	t.Run("trigger-sampling-request as a task answered on tasks/result", func(t *testing.T) {
		task := c.createTask("trigger-sampling-request", map[string]any{"prompt": "hello", "maxTokens": 20}, 120000)
		waitStatus(t, c, task.TaskID, "input_required", 60*time.Second)
		final, asked := resultStream(t, c, task.TaskID, func(string) any { return sampleAnswer })
		if len(asked) != 1 || asked[0] != "sampling/createMessage" {
			t.Errorf("requests on tasks/result = %v, want one sampling/createMessage", asked)
		}
		if final.Error != nil || !strings.Contains(string(final.Result), "a bridged sample") {
			t.Errorf("tasks/result = %s / %+v, want the sample in the result", final.Result, final.Error)
		}
	})

	t.Run("cancel a trigger-long-running-operation task", func(t *testing.T) {
		// The server's long operation does not watch for cancellation, so
		// what is observable is the gateway's side: the task ends
		// cancelled at once, the tasks/result stream that relays its
		// progress answers the cancellation and stops, and the server's
		// own late completion never overwrites the outcome.
		m := c.call("tools/call", map[string]any{
			"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 4, "steps": 4},
			"task": map[string]any{"ttl": 120000}, "_meta": map[string]any{"progressToken": "cancel-me"},
		})
		var created struct {
			Task v2025Task `json:"task"`
		}
		if m.Error != nil || json.Unmarshal(m.Result, &created) != nil || created.Task.TaskID == "" {
			t.Fatalf("task-augmented call = %s / %+v", m.Result, m.Error)
		}
		id := created.Task.TaskID
		body, _ := jsonrpc.RequestBytes(json.RawMessage(`"result-2"`), "tasks/result", map[string]string{"taskId": id})
		stream := c.open(context.Background(), body)
		defer stream.close()
		for {
			m := stream.next()
			if m == nil || m.IsResponse() {
				t.Fatalf("tasks/result ended before any progress: %+v", m)
			}
			if m.Method == "notifications/progress" {
				break
			}
		}
		var cancelled v2025Task
		c.result("tasks/cancel", map[string]string{"taskId": id}, &cancelled)
		if cancelled.Status != "cancelled" {
			t.Fatalf("tasks/cancel = %+v", cancelled)
		}
		var final *jsonrpc.Message
		for final == nil {
			m := stream.next()
			if m == nil {
				t.Fatal("tasks/result stream ended without an answer after the cancel")
			}
			if m.IsResponse() {
				final = m
			}
		}
		if strings.Contains(string(final.Result), "Long running operation completed") {
			t.Errorf("tasks/result after the cancel = %s, want no completion", final.Result)
		}
		// Past the operation's own end: the outcome stays the cancel.
		time.Sleep(5 * time.Second)
		if got := c.getTask(id); got.Status != "cancelled" {
			t.Errorf("task after the operation's own end = %+v, want cancelled", got)
		}
	})
}
