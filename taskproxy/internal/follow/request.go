package follow

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

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
		if upstream.IsRoutingHeader(k) { // the call's Mcp-Name and Mcp-Param-*
			delete(req.Header, k)
		}
	}
	req.Header.Del(upstream.HeaderSessionID)
	req.Header.Set(upstream.HeaderProtocolVersion, string(task.Era2026))
	req.Header.Set(upstream.HeaderMethod, method)
	if name, ok := params["taskId"].(string); ok {
		req.Header.Set(upstream.HeaderName, upstream.EncodeHeaderValue(name))
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
