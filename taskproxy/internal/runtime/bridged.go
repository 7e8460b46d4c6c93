package runtime

import (
	"encoding/json"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Bridged tasks: a 2026-07-28 client's task whose call runs on a 2025-11-25
// upstream session the version bridge holds (task.Task.Session is set). The
// worker runs it as a 2025-11-25 call and records its result with the
// 2026-07-28 fields; what the bridge alone knows (its session table) it
// lends through RouteConfig.SessionLost.

// BridgedResult is the result a task records: for a bridged task the
// upstream's 2025-11-25 result with the 2026-07-28 fields.
func BridgedResult(t *task.Task, result json.RawMessage) json.RawMessage {
	if t.Era != task.Era2026 || t.Session == "" || result == nil {
		return result
	}
	return translate.Result("tools/call", result, nil)
}

// msgBridgeSessionLost is the error of a bridged task whose upstream
// session the upstream no longer knew when the task was to be created.
const msgBridgeSessionLost = "the upstream no longer knows the session the version bridge held for the caller (it restarted or ended it); the session is re-opened at the next call: call the tool again"

// msgSessionLost is the error of a 2025-11-25 task whose call the upstream
// refused because it no longer knew the client's session: the gateway ended
// the session as well, so the client's next request in it gets 404 and the
// client starts a new one, as the transport specifies.
const msgSessionLost = "the upstream no longer knows the session this task's call ran on (it restarted or ended it); the gateway ended the session too: initialize a new session and call the tool again"

// sessionLostError is the error of task t whose upstream session was lost.
func sessionLostError(t *task.Task) *jsonrpc.Error {
	if t.Era == task.Era2026 {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", msgBridgeSessionLost)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", msgSessionLost)
}

// MsgBridgedInput is the status message of a 2026-07-28 task waiting for
// input: its inputRequests are answered with tasks/update.
const MsgBridgedInput = "The task needs input: answer its inputRequests with tasks/update."

// MsgV2025Input is the status message of a 2025-11-25 task waiting for
// input: its client answers the requests relayed on tasks/result.
const MsgV2025Input = "The task needs input: answer the requests on the tasks/result stream."

// InputMessage is the status message of a task of era waiting for input,
// in the terms of that era's client.
func InputMessage(era task.Era) string {
	if era == task.Era2025 {
		return MsgV2025Input
	}
	return MsgBridgedInput
}

// UpstreamSpeaksV2025 reports whether a task's upstream call is a
// 2025-11-25 one (server-to-client requests, notifications/cancelled): a
// 2025-11-25 task's, unless it follows a 2026-07-28 upstream's task (the
// reverse bridge's), or a bridged 2026-07-28 task's (it runs on an
// upstream session).
func UpstreamSpeaksV2025(t *task.Task) bool {
	return t.Era == task.Era2025 && !t.UpstreamV2026 || t.Session != ""
}
