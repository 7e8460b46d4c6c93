package taskproxy

import (
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// paramsRead are the members of params the gateway reads or edits in any
// request or notification it looks at: those MCP defines for the methods it
// answers, runs or rewrites, and the _meta members it acts on.
var paramsRead = &gate.ReadMembers{
	Names: []string{"name", "arguments", "task", "taskId", "_meta", "cursor", "requestState",
		"inputResponses", "notifications", "requestId", "reason", "protocolVersion", "capabilities", "clientInfo"},
	Nested: []*gate.ReadMembers{
		2: {Names: []string{"ttl"}},
		4: {
			Names: []string{wire.MetaProtocolVersion, wire.MetaClientCapabilities, gate.MetaIdempotencyKey, "progressToken",
				task.MetaRelatedTask, translate.MetaLogLevel, translate.MetaClientInfo},
			Nested: []*gate.ReadMembers{1: {
				Names:  []string{"extensions", "tasks"},
				Nested: []*gate.ReadMembers{{Names: []string{wire.ExtensionTasks}}},
			}},
		},
		8: {Names: []string{"taskIds"}},
		12: {
			Names:  []string{"extensions", "tasks"},
			Nested: []*gate.ReadMembers{{Names: []string{wire.ExtensionTasks}}},
		},
	},
}
