package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The 2026-07-28 flows: calls that become tasks after task_after, polled
// with tasks/get or watched with subscriptions/listen, input answered with
// tasks/update, tasks/cancel, a call answered before task_after, and a
// deliberate refusal.

const v2026 = "2026-07-28"

func flows2026() []flow {
	return []flow{
		{"v2026 task+poll", flow2026Poll},
		{"v2026 task+listen", flow2026Listen},
		{"v2026 input_required+update", flow2026Input},
		{"v2026 cancel", flow2026Cancel},
		{"v2026 pass-through", flow2026Plain},
		{"v2026 refusal", flow2026Refusal},
	}
}

// body2026 returns the request's id and body: params with the _meta every
// 2026-07-28 request carries; declare lists the tasks extension.
func (d *soakPeer) body2026(method string, params map[string]any, declare bool) (json.RawMessage, []byte, http.Header, error) {
	caps := map[string]any{"elicitation": map[string]any{}}
	if declare {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	p := maps.Clone(params)
	if p == nil {
		p = map[string]any{}
	}
	p["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    v2026,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "soak", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": caps,
	}
	h := http.Header{"Mcp-Protocol-Version": {v2026}, "Mcp-Method": {method}}
	if name, ok := params["name"].(string); ok {
		h.Set("Mcp-Name", name)
	}
	if id, ok := params["taskId"].(string); ok {
		h.Set("Mcp-Name", id)
	}
	id := d.c.nextID()
	body, err := jsonrpc.RequestBytes(id, method, p)
	return id, body, h, err
}

// call2026 sends one request declaring the tasks extension and returns its
// response.
func (d *soakPeer) call2026(ctx context.Context, method string, params map[string]any, declare bool) (*jsonrpc.Message, error) {
	id, body, h, err := d.body2026(method, params, declare)
	if err != nil {
		return nil, err
	}
	var resp *jsonrpc.Message
	_, status, err := d.c.exchange(ctx, h, body, func(m *jsonrpc.Message) bool {
		if m.Method == "" && string(m.ID) == string(id) {
			resp = m
			return false
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("%s: HTTP %d without a response", method, status)
	}
	return resp, nil
}

// ok2026 is ok on the 2026-07-28 wire.
func (d *soakPeer) ok2026(ctx context.Context, label, method string, params map[string]any, out any) error {
	m, err := d.call2026(ctx, method, params, true)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	if m.Error != nil {
		return fmt.Errorf("%s: error %d %s", label, m.Error.Code, m.Error.Message)
	}
	if err := json.Unmarshal(m.Result, out); err != nil {
		return fmt.Errorf("%s: decoding %.200s: %w", label, m.Result, err)
	}
	d.t.add(label, outcomeOK)
	return nil
}

// task2026 is a CreateTaskResult or DetailedTask, as far as the flows read
// them.
type task2026 struct {
	ResultType    string                     `json:"resultType"`
	TaskID        string                     `json:"taskId"`
	Status        string                     `json:"status"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        json.RawMessage            `json:"result"`
}

// create2026 calls a tool that must become a task.
func (d *soakPeer) create2026(ctx context.Context, tool string, args map[string]any) (task2026, error) {
	var tk task2026
	if err := d.ok2026(ctx, "v2026 tools/call (becomes task)", "tools/call", map[string]any{"name": tool, "arguments": args}, &tk); err != nil {
		return tk, err
	}
	if tk.ResultType != "task" || tk.TaskID == "" {
		return tk, fmt.Errorf("tools/call %s: answered %+v, want a task", tool, tk)
	}
	return tk, nil
}

func (d *soakPeer) get2026(ctx context.Context, id string) (task2026, error) {
	var tk task2026
	err := d.ok2026(ctx, "v2026 tasks/get", "tasks/get", map[string]any{"taskId": id}, &tk)
	return tk, err
}

// poll2026 polls until the task is want and returns it.
func (d *soakPeer) poll2026(ctx context.Context, id, want string) (task2026, error) {
	var tk task2026
	err := pollStatus(ctx, want, func() (string, error) {
		var err error
		tk, err = d.get2026(ctx, id)
		return tk.Status, err
	})
	if err != nil {
		return tk, fmt.Errorf("task %s: %w", id, err)
	}
	return tk, nil
}

// slowSeconds is how long the 2026 flows' slow_compute works: well past
// task_after, so that the call becomes a task.
const slowSeconds = 1.0

// slow2026 calls slow_compute for slowSeconds, which becomes a task; it
// returns "" when the answer came first. That happens when Caddy gets no
// CPU from task_after until the answer (this machine is shared): the
// gateway then sees the answer before its timer, and a call that answers
// before task_after gets its answer, which is checked here.
func (d *soakPeer) slow2026(ctx context.Context, label string) (string, error) {
	m, err := d.call2026(ctx, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": slowSeconds, "label": label}}, true)
	if err != nil {
		return "", err
	}
	var res struct {
		toolResult
		task2026
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		return "", fmt.Errorf("tools/call slow_compute: %s", answered(m))
	}
	switch {
	case res.ResultType == "task" && res.TaskID != "":
		d.t.add("v2026 tools/call (becomes task)", outcomeOK)
		return res.TaskID, nil
	case res.TaskID == "" && strings.Contains(res.text(), "Computed "+label):
		d.t.add("v2026 tools/call (answered before task_after)", outcomeOK)
		return "", nil
	}
	return "", fmt.Errorf("tools/call slow_compute: answered %.200s, want a task or the tool's result", m.Result)
}

func flow2026Poll(ctx context.Context, d *soakPeer) error {
	id, err := d.slow2026(ctx, "polled")
	if err != nil || id == "" {
		return err
	}
	tk := task2026{TaskID: id}
	done, err := d.poll2026(ctx, tk.TaskID, "completed")
	if err == nil && !strings.Contains(string(done.Result), "Computed polled") {
		err = fmt.Errorf("task %s: result %.200s", tk.TaskID, done.Result)
	}
	return err
}

// flow2026Listen watches the task with subscriptions/listen until it ends.
func flow2026Listen(ctx context.Context, d *soakPeer) error {
	id, err := d.slow2026(ctx, "listened")
	if err != nil || id == "" {
		return err
	}
	tk := task2026{TaskID: id}
	_, body, h, err := d.body2026("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{tk.TaskID}}}, true)
	if err != nil {
		return err
	}
	acknowledged, ended := false, ""
	var bad error
	_, status, err := d.c.exchange(ctx, h, body, func(m *jsonrpc.Message) bool {
		var p struct {
			TaskID string          `json:"taskId"`
			Status string          `json:"status"`
			Result json.RawMessage `json:"result"`
		}
		_ = json.Unmarshal(m.Params, &p)
		switch {
		case m.Method == "notifications/subscriptions/acknowledged":
			acknowledged = true
		case m.Method == "notifications/tasks" && p.TaskID == tk.TaskID:
			if p.Status == "working" {
				return true
			}
			ended = p.Status
			if p.Status != "completed" || !strings.Contains(string(p.Result), "Computed listened") {
				bad = fmt.Errorf("task %s: notified %s with result %.200s", tk.TaskID, p.Status, p.Result)
			}
			return false
		case m.Error != nil:
			bad = fmt.Errorf("task %s: subscriptions/listen: error %d %s", tk.TaskID, m.Error.Code, m.Error.Message)
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return fmt.Errorf("task %s: %w", tk.TaskID, err)
	case bad != nil:
		return bad
	case !acknowledged || ended == "":
		return fmt.Errorf("task %s: listen stream (HTTP %d) ended early (acknowledged %t, status %q)", tk.TaskID, status, acknowledged, ended)
	}
	d.t.add("v2026 subscriptions/listen", outcomeOK)
	return nil
}

// flow2026Input answers the upstream's question with tasks/update.
func flow2026Input(ctx context.Context, d *soakPeer) error {
	tk, err := d.create2026(ctx, "confirm_delete", map[string]any{"filename": "soak.txt"})
	if err != nil {
		return err
	}
	waiting, err := d.poll2026(ctx, tk.TaskID, "input_required")
	if err != nil {
		return err
	}
	if len(waiting.InputRequests) != 1 {
		return fmt.Errorf("task %s: %d input requests, want 1", tk.TaskID, len(waiting.InputRequests))
	}
	answers := map[string]any{}
	for k := range waiting.InputRequests {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	var ack task2026
	if err := d.ok2026(ctx, "v2026 tasks/update", "tasks/update", map[string]any{"taskId": tk.TaskID, "inputResponses": answers}, &ack); err != nil {
		return err
	}
	done, err := d.poll2026(ctx, tk.TaskID, "completed")
	if err == nil && !strings.Contains(string(done.Result), "Deleted soak.txt") {
		err = fmt.Errorf("task %s: result %.200s", tk.TaskID, done.Result)
	}
	return err
}

func flow2026Cancel(ctx context.Context, d *soakPeer) error {
	tk, err := d.create2026(ctx, "slow_compute", map[string]any{"seconds": 60, "label": "cancelled"})
	if err != nil {
		return err
	}
	var ack task2026
	if err := d.ok2026(ctx, "v2026 tasks/cancel", "tasks/cancel", map[string]any{"taskId": tk.TaskID}, &ack); err != nil {
		return err
	}
	got, err := d.get2026(ctx, tk.TaskID)
	if err == nil && got.Status != "cancelled" {
		err = fmt.Errorf("task %s: %s after tasks/cancel", tk.TaskID, got.Status)
	}
	return err
}

// flow2026Plain calls a tool that answers before task_after: the answer
// is the upstream's, no task.
func flow2026Plain(ctx context.Context, d *soakPeer) error {
	var res struct {
		toolResult
		TaskID string `json:"taskId"`
	}
	if err := d.ok2026(ctx, "v2026 tools/call (answered)", "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "soak"}}, &res); err != nil {
		return err
	}
	if res.TaskID != "" || res.text() != "Hello, soak!" {
		return fmt.Errorf("greet answered %+v", res)
	}
	return nil
}

// flow2026Refusal calls a tool configured required without declaring the
// tasks extension.
func flow2026Refusal(ctx context.Context, d *soakPeer) error {
	m, err := d.call2026(ctx, "tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}}, false)
	if err != nil {
		return fmt.Errorf("v2026 tools/call (required, undeclared): %w", err)
	}
	if m.Error == nil || m.Error.Code != jsonrpc.CodeMissingRequiredClientCapability {
		return fmt.Errorf("v2026 tools/call (required, undeclared): got %s, want error %d", answered(m), jsonrpc.CodeMissingRequiredClientCapability)
	}
	d.t.add("v2026 tools/call (required, undeclared)", outcomeRefused)
	return nil
}
