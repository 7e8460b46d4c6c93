package v2026

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestWithoutTasksExtension(t *testing.T) {
	t.Parallel()
	in := `{"name":"x","_meta":{"progressToken":1,"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{},"other/ext":{}}}}}`
	out, err := withoutTasksExtension(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"x","_meta":{"progressToken":1,"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"other/ext":{}}}}}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

func TestV2026Render(t *testing.T) {
	t.Parallel()
	base := &task.Task{ID: "t1", TTL: 60000 * 1e6, PollInterval: 1e9}
	tests := []struct {
		name   string
		tk     func() *task.Task
		status task.Status
		has    []string
		lacks  []string
	}{
		{"working", func() *task.Task { t := *base; t.Status = task.StatusWorking; return &t }, task.StatusWorking, nil, []string{`"result":`, `"error"`, "inputRequests"}},
		{"input", func() *task.Task {
			t := *base
			t.Status = task.StatusInputRequired
			t.Inputs = []task.InputRequest{{Key: "1", Method: "elicitation/create", Answered: true}, {Key: "2", Method: "elicitation/create", Params: json.RawMessage(`{"message":"?"}`)}}
			return &t
		}, task.StatusInputRequired, []string{`"inputRequests":{"2":{"method":"elicitation/create","params":{"message":"?"}}}`}, []string{`"1":`, "requestState"}},
		{"tool error is completed", func() *task.Task {
			t := *base
			t.Status, t.Result, t.IsError = task.StatusFailed, json.RawMessage(`{"isError":true}`), true
			return &t
		}, task.StatusCompleted, []string{`"result":{"isError":true}`}, []string{`"error"`}},
		{"rpc error is failed", func() *task.Task {
			t := *base
			t.Status, t.Error = task.StatusFailed, jsonrpc.Errorf(-32603, "boom")
			return &t
		}, task.StatusFailed, []string{`"error":{"code":-32603,"message":"boom"}`}, []string{`"result"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Detail(tt.tk(), "complete")
			data, _ := json.Marshal(v)
			if v.Status != tt.status || !strings.Contains(string(data), `"resultType":"complete"`) || !strings.Contains(string(data), `"ttlMs":60000`) {
				t.Errorf("render = %s", data)
			}
			for _, s := range tt.has {
				if !strings.Contains(string(data), s) {
					t.Errorf("%s lacks %s", data, s)
				}
			}
			for _, s := range tt.lacks {
				if strings.Contains(string(data), s) {
					t.Errorf("%s has %s", data, s)
				}
			}
		})
	}
}
