package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The 2025-11-25 flows: task-augmented tools/call, tasks/get polls,
// tasks/result (blocking, and carrying an elicitation the flow answers),
// tasks/cancel, a tool error, a plain call and a deliberate refusal, on
// sessions shared by the flows, plus sessions opened and closed.

const v2025 = "2025-11-25"

func h2025(session string) http.Header {
	return http.Header{"Mcp-Session-Id": {session}, "Mcp-Protocol-Version": {v2025}}
}

// task2025 is the 2025-11-25 Task object, as far as the flows read it.
type task2025 struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
}

// toolResult is a CallToolResult, as far as the flows read it.
type toolResult struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
}

func (r toolResult) text() string {
	if len(r.Content) == 0 {
		return ""
	}
	return r.Content[0].Text
}

func flows2025() []flow {
	return []flow{
		{"v2025 create+poll+result", flow2025Poll},
		{"v2025 create+blocking result", flow2025Blocking},
		{"v2025 cancel", flow2025Cancel},
		{"v2025 input_required", flow2025Input},
		{"v2025 tool error", flow2025ToolError},
		{"v2025 pass-through", flow2025Plain},
		{"v2025 refusal", flow2025Refusal},
		{"v2025 session open+close", flow2025Session},
	}
}

// create2025 starts a task-augmented call.
func (d *soakPeer) create2025(ctx context.Context, h http.Header, tool string, args map[string]any) (string, error) {
	var created struct {
		Task task2025 `json:"task"`
	}
	params := map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": d.ttlMs}}
	if err := d.ok(ctx, "v2025 tools/call (task)", h, "tools/call", params, &created); err != nil {
		return "", err
	}
	if created.Task.TaskID == "" {
		return "", fmt.Errorf("tools/call %s: no task in the answer", tool)
	}
	return created.Task.TaskID, nil
}

func (d *soakPeer) get2025(ctx context.Context, h http.Header, id string) (string, error) {
	var tk task2025
	if err := d.ok(ctx, "v2025 tasks/get", h, "tasks/get", map[string]string{"taskId": id}, &tk); err != nil {
		return "", err
	}
	return tk.Status, nil
}

func flow2025Poll(ctx context.Context, d *soakPeer) error {
	h := h2025(d.session())
	id, err := d.create2025(ctx, h, "slow_compute", map[string]any{"seconds": 0.3, "label": "soak"})
	if err != nil {
		return err
	}
	if err := pollStatus(ctx, "completed", func() (string, error) { return d.get2025(ctx, h, id) }); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	var res toolResult
	if err := d.ok(ctx, "v2025 tasks/result", h, "tasks/result", map[string]string{"taskId": id}, &res); err != nil {
		return err
	}
	if !strings.Contains(res.text(), "Computed soak") {
		return fmt.Errorf("task %s: result %q", id, res.text())
	}
	return nil
}

// flow2025Blocking asks for the result at once, so that tasks/result waits
// on the running task (a long-lived answer).
func flow2025Blocking(ctx context.Context, d *soakPeer) error {
	h := h2025(d.session())
	id, err := d.create2025(ctx, h, "slow_compute", map[string]any{"seconds": 0.5, "label": "blocking"})
	if err != nil {
		return err
	}
	var res toolResult
	if err := d.ok(ctx, "v2025 tasks/result", h, "tasks/result", map[string]string{"taskId": id}, &res); err != nil {
		return err
	}
	if !strings.Contains(res.text(), "Computed blocking") {
		return fmt.Errorf("task %s: result %q", id, res.text())
	}
	return nil
}

func flow2025Cancel(ctx context.Context, d *soakPeer) error {
	h := h2025(d.session())
	id, err := d.create2025(ctx, h, "slow_compute", map[string]any{"seconds": 60, "label": "cancelled"})
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, 2*pollEvery); err != nil {
		return err
	}
	var tk task2025
	if err := d.ok(ctx, "v2025 tasks/cancel", h, "tasks/cancel", map[string]string{"taskId": id}, &tk); err != nil {
		return err
	}
	if tk.Status != "cancelled" {
		return fmt.Errorf("task %s: tasks/cancel answered status %s", id, tk.Status)
	}
	status, err := d.get2025(ctx, h, id)
	if err == nil && status != "cancelled" {
		err = fmt.Errorf("task %s: %s after tasks/cancel", id, status)
	}
	return err
}

// flow2025Input answers the elicitation the upstream sends mid-call; it
// reaches the client on the tasks/result stream.
func flow2025Input(ctx context.Context, d *soakPeer) error {
	h := h2025(d.session())
	id, err := d.create2025(ctx, h, "confirm_delete", map[string]any{"filename": "soak.txt"})
	if err != nil {
		return err
	}
	if err := pollStatus(ctx, "input_required", func() (string, error) { return d.get2025(ctx, h, id) }); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	rid := d.c.nextID()
	body, err := jsonrpc.RequestBytes(rid, "tasks/result", map[string]string{"taskId": id})
	if err != nil {
		return err
	}
	var final *jsonrpc.Message
	var answerErr error
	answered := 0
	_, status, err := d.c.exchange(ctx, h, body, func(m *jsonrpc.Message) bool {
		switch {
		case m.Method == "elicitation/create" && len(m.ID) > 0:
			answer, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"confirm": true}})
			if answerErr = d.c.send(ctx, h, answer); answerErr != nil {
				return false
			}
			d.t.add("v2025 elicitation answer", outcomeOK)
			answered++
		case m.Method == "" && string(m.ID) == string(rid):
			final = m
			return false
		}
		return true
	})
	switch {
	case err != nil:
		return fmt.Errorf("task %s: tasks/result: %w", id, err)
	case answerErr != nil:
		return fmt.Errorf("task %s: answering the elicitation: %w", id, answerErr)
	case final == nil:
		return fmt.Errorf("task %s: tasks/result (HTTP %d) ended without the result", id, status)
	case final.Error != nil:
		return fmt.Errorf("task %s: tasks/result: error %d %s", id, final.Error.Code, final.Error.Message)
	case answered != 1:
		return fmt.Errorf("task %s: %d elicitations, want 1", id, answered)
	case !strings.Contains(string(final.Result), "Deleted soak.txt"):
		return fmt.Errorf("task %s: result %.200s", id, final.Result)
	}
	d.t.add("v2025 tasks/result", outcomeOK)
	return nil
}

// flow2025ToolError runs a tool that fails with isError: the task fails
// and tasks/result is the tool's result.
func flow2025ToolError(ctx context.Context, d *soakPeer) error {
	h := h2025(d.session())
	id, err := d.create2025(ctx, h, "failing_job", map[string]any{})
	if err != nil {
		return err
	}
	m, _, err := d.c.call(ctx, h, "tasks/result", map[string]string{"taskId": id})
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	var res toolResult
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || !res.IsError {
		return fmt.Errorf("task %s: tasks/result %s, want a result with isError", id, answered(m))
	}
	d.t.add("v2025 tasks/result", outcomeToolError)
	status, err := d.get2025(ctx, h, id)
	if err == nil && status != "failed" {
		err = fmt.Errorf("task %s: %s after a tool error, want failed", id, status)
	}
	return err
}

func flow2025Plain(ctx context.Context, d *soakPeer) error {
	var res toolResult
	params := map[string]any{"name": "greet", "arguments": map[string]any{"name": "soak"}}
	if err := d.ok(ctx, "v2025 tools/call (plain)", h2025(d.session()), "tools/call", params, &res); err != nil {
		return err
	}
	if res.text() != "Hello, soak!" {
		return fmt.Errorf("greet answered %q", res.text())
	}
	return nil
}

// flow2025Refusal asks for a task of a tool configured forbidden.
func flow2025Refusal(ctx context.Context, d *soakPeer) error {
	params := map[string]any{"name": "greet", "arguments": map[string]any{"name": "soak"}, "task": map[string]any{"ttl": d.ttlMs}}
	return d.refused(ctx, "v2025 tools/call (forbidden task)", h2025(d.session()), "tools/call", params, jsonrpc.CodeMethodNotFound, "does not support")
}

// flow2025Session opens a session, lists the tools and closes it.
func flow2025Session(ctx context.Context, d *soakPeer) error {
	sid, err := d.initialize(ctx)
	if err != nil {
		return err
	}
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := d.ok(ctx, "v2025 tools/list", h2025(sid), "tools/list", nil, &list); err != nil {
		return err
	}
	if len(list.Tools) == 0 {
		return fmt.Errorf("tools/list listed no tools")
	}
	return d.deleteSession(ctx, sid)
}

// initialize opens a 2025-11-25 session.
func (d *soakPeer) initialize(ctx context.Context) (string, error) {
	params := json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"soak","version":"1"}}`)
	m, hdr, err := d.c.call(ctx, http.Header{}, "initialize", params)
	if err != nil {
		return "", err
	}
	if m.Error != nil {
		return "", fmt.Errorf("initialize: error %d %s", m.Error.Code, m.Error.Message)
	}
	sid := hdr.Get("Mcp-Session-Id")
	if sid == "" {
		return "", fmt.Errorf("initialize: no Mcp-Session-Id")
	}
	d.t.add("v2025 initialize", outcomeOK)
	body, _ := jsonrpc.RequestBytes(nil, "notifications/initialized", nil)
	if err := d.c.send(ctx, h2025(sid), body); err != nil {
		return "", fmt.Errorf("notifications/initialized: %w", err)
	}
	return sid, nil
}

// deleteSession ends a session with DELETE, as a client that leaves does.
func (d *soakPeer) deleteSession(ctx context.Context, sid string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, d.c.url, nil)
	if err != nil {
		return err
	}
	req.Header = h2025(sid)
	resp, err := d.c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("DELETE of session %s: %w", sid, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("DELETE of session %s: HTTP %d", sid, resp.StatusCode)
	}
	d.t.add("v2025 DELETE session", outcomeOK)
	return nil
}
