package taskproxy

import (
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Upstream SDKs do not all read object keys alike: Go's encoding/json (go-sdk,
// mcp-go) matches a key to a field under Unicode simple case folding and
// takes the last of duplicates ("NAME", or "nſme" with U+017F, is "name"),
// JavaScript's JSON.parse matches exactly and also takes the last. Where the
// gateway reads a member it acts on (a tool's name, params.task, a task id,
// _meta), a key that another reader could take for that member is refused:
// both readers then see the same message.

// readMembers names the members of one object the gateway reads, with the
// rules for the objects nested under some of them (nil where there are
// none).
type readMembers struct {
	names  []string
	nested []*readMembers
}

// paramsRead are the members of params the gateway reads or edits in any
// request or notification it looks at: those MCP defines for the methods it
// answers, runs or rewrites, and the _meta members it acts on.
var paramsRead = &readMembers{
	names: []string{"name", "arguments", "task", "taskId", "_meta", "cursor", "requestState",
		"inputResponses", "notifications", "requestId", "reason", "protocolVersion", "capabilities", "clientInfo"},
	nested: []*readMembers{
		2: {names: []string{"ttl"}},
		4: {
			names: []string{metaProtocolVersion, metaClientCapabilities, metaIdempotencyKey, "progressToken",
				metaRelatedTask, metaLogLevel, metaClientInfo},
			nested: []*readMembers{1: {
				names:  []string{"extensions", "tasks"},
				nested: []*readMembers{{names: []string{extensionTasks}}},
			}},
		},
		8: {names: []string{"taskIds"}},
		12: {
			names:  []string{"extensions", "tasks"},
			nested: []*readMembers{{names: []string{extensionTasks}}},
		},
	},
}

// errAmbiguousParam is a message whose params name a member the gateway
// reads twice, or in another case.
var errAmbiguousParam = &jsonrpc.ReadError{Code: jsonrpc.CodeInvalidRequest, Reason: "a member of params the gateway reads appears twice or in another case"}

// checkReadMembers refuses, with errAmbiguousParam, an object (and the
// objects nested in it that rule covers) in which a member the rule names
// appears twice or is spelled so that a case-folding reader takes it for
// one. Other members are not looked at. It allocates nothing for keys
// without escapes.
func checkReadMembers(obj []byte, rule *readMembers) error {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	var seen uint64
	var failed error
	_, err := jsonx.EachMember(obj, func(mem jsonx.Member) bool {
		i, folded := jsonx.MatchKey(obj, mem, rule.names)
		switch {
		case folded:
			failed = errAmbiguousParam
		case i < 0:
			return true
		case seen&(1<<i) != 0:
			failed = errAmbiguousParam
		default:
			seen |= 1 << i
			if i < len(rule.nested) && rule.nested[i] != nil {
				failed = checkReadMembers(obj[mem.ValueStart:mem.ValueEnd], rule.nested[i])
			}
		}
		return failed == nil
	})
	if err != nil {
		return jsonrpc.ErrMalformedJSON
	}
	return failed
}
