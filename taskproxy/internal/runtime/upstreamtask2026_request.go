package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The requests a followed 2026-07-28 task makes of the upstream's task
// (tasks/get, tasks/update, tasks/cancel): the extension's required _meta
// and routing headers, whoever sends them.

// v2026UpstreamRequest sends the upstream a task request on the 2026-07-28
// wire, from base's headers; callParams are the params of the call that
// made the upstream's task, whose client capabilities it repeats.
func v2026UpstreamRequest(ctx context.Context, base *http.Request, next http.Handler, callParams json.RawMessage, id json.RawMessage, method string, params map[string]any) (*jsonrpc.Message, error) {
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    string(task.Era2026),
		"io.modelcontextprotocol/clientCapabilities": v2026ClientCapabilities(callParams),
	}
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	req := upstream.NewRequest(ctx, base, body)
	for k := range req.Header {
		if IsRoutingHeader(k) { // the call's Mcp-Name and Mcp-Param-*
			delete(req.Header, k)
		}
	}
	req.Header.Del(upstream.HeaderSessionID)
	req.Header.Set(upstream.HeaderProtocolVersion, string(task.Era2026))
	req.Header.Set(upstream.HeaderMethod, method)
	if name, ok := params["taskId"].(string); ok {
		req.Header.Set(upstream.HeaderName, headerValue(name))
	}
	resp, err := upstream.Call(next, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	defer upstream.FinishBody(resp.Body, time.Second)
	if resp.Status < 200 || resp.Status > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, upstream.MaxHTTPFailureBody))
		if m, err := jsonrpc.Parse(data); err == nil && m.Error != nil {
			return m, nil // a 2026-07-28 refusal: 400 with -32602, -32020 …
		}
		return &jsonrpc.Message{JSONRPC: "2.0", ID: id, Error: upstream.DescribeHTTPFailure(resp.Status, data)}, nil
	}
	answer, err := upstream.ReadAnswer(resp, id, upstream.MaxResultOf(ctx))
	if answer != nil {
		return answer, nil
	}
	if err == nil {
		err = fmt.Errorf("the upstream answered %s without a response", method)
	}
	return nil, fmt.Errorf("%s: %w", method, err)
}

// v2026ClientCapabilities is the client capabilities the task's call
// declared (the tasks extension among them), or just the extension.
func v2026ClientCapabilities(params json.RawMessage) json.RawMessage {
	if meta, ok := jsonx.Get(params, "_meta"); ok {
		if caps, ok := jsonx.Get(meta, "io.modelcontextprotocol/clientCapabilities"); ok && len(caps) > 0 && caps[0] == '{' {
			return caps
		}
	}
	return json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
}

// headerValue is an MCP header value: as is when plain printable ASCII,
// else in the =?base64?…?= form.
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
		}
	}
	if strings.TrimSpace(v) != v {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
	}
	return v
}

// cancelV2026UpstreamTask sends the upstream tasks/cancel for its task.
func (route *Route) cancelV2026UpstreamTask(ctx context.Context, run *Run, t *task.Task, upstreamTaskID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	answer, err := v2026UpstreamRequest(ctx, run.Base, run.Next, t.Params, followID(t.ID, "cancel", 1), "tasks/cancel", map[string]any{"taskId": upstreamTaskID})
	switch {
	case err != nil:
		route.log.Warn("cancelling the upstream's task", zap.String("task", t.ID), zap.String("upstream_task", upstreamTaskID), zap.Error(err))
	case answer.Error != nil:
		if ce := route.log.Check(zap.DebugLevel, "upstream refused tasks/cancel"); ce != nil {
			ce.Write(zap.String("task", t.ID), zap.String("upstream_task", upstreamTaskID), zap.String("error", answer.Error.Message))
		}
	}
}
