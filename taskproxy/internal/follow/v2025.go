package follow

import (
	"encoding/json"
	"fmt"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// MsgUpstreamTaskGone is the error of a task whose upstream task the
// upstream no longer knows (it restarted, dropped the session, or purged it).
const MsgUpstreamTaskGone = "the upstream no longer knows its task %s (it may have restarted, ended the session, or expired the task); the result is lost"

// MaxFollowFailures bounds the tasks/result calls in a row that end
// without an answer while the upstream still knows the task.
const MaxFollowFailures = 10

// upstreamTaskParams returns the params of the call that creates the
// upstream's task: the stored params with params.task asking for the
// gateway task's ttl.
func upstreamTaskParams(t *task.Task) (json.RawMessage, error) {
	meta, _ := json.Marshal(map[string]int64{"ttl": t.TTL.Milliseconds()})
	p, err := jsonx.Set(jsonx.OrEmptyObject(t.Params), "task", meta)
	if err != nil {
		return nil, fmt.Errorf("adding params.task: %w", err)
	}
	return p, nil
}

// UpstreamCallParams returns the params of t's tools/call as the upstream
// receives them: with params.task when the upstream makes the task.
func UpstreamCallParams(t *task.Task) (json.RawMessage, error) {
	if t.UpstreamTask && !t.UpstreamV2026 { // 2026-07-28: the extension, kept in t.Params, asks
		return upstreamTaskParams(t)
	}
	return t.Params, nil
}

// UpstreamCallBody encodes t's tools/call to the upstream.
func UpstreamCallBody(t *task.Task) ([]byte, error) {
	params, err := UpstreamCallParams(t)
	if err != nil {
		return nil, err
	}
	return jsonrpc.RequestBytes(t.UpstreamID, "tools/call", params)
}

// FollowID is the id of the worker's n-th request about the upstream's task.
func FollowID(taskID, what string, n int) json.RawMessage {
	id, _ := json.Marshal(fmt.Sprintf("%s%s:%s:%d", jsonrpc.GatewayIDPrefix, taskID, what, n))
	return id
}

// WithoutRelatedTask removes the upstream's related-task meta from a
// tasks/result answer: it names the upstream's task id, and the task's
// answer carries the gateway's own instead.
func WithoutRelatedTask(result json.RawMessage) json.RawMessage {
	meta, ok := jsonx.Get(result, "_meta")
	if !ok {
		return result
	}
	if _, ok := jsonx.Get(meta, task.MetaRelatedTask); !ok {
		return result
	}
	out, err := jsonx.DeleteIn(result, "_meta", func(k string) bool { return k == task.MetaRelatedTask })
	if err != nil {
		return result
	}
	return out
}
