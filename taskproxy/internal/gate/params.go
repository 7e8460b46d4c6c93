package gate

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

// ReadMembers names the members of one object the gateway reads, with the
// rules for the objects nested under some of them (nil where there are
// none).
type ReadMembers struct {
	Names  []string
	Nested []*ReadMembers
}

// ErrAmbiguousParam is a message whose params name a member the gateway
// reads twice, or in another case.
var ErrAmbiguousParam = &jsonrpc.ReadError{Code: jsonrpc.CodeInvalidRequest, Reason: "a member of params the gateway reads appears twice or in another case"}

// CheckReadMembers refuses, with ErrAmbiguousParam, an object (and the
// objects nested in it that rule covers) in which a member the rule names
// appears twice or is spelled so that a case-folding reader takes it for
// one. Other members are not looked at. It allocates nothing for keys
// without escapes.
func CheckReadMembers(obj []byte, rule *ReadMembers) error {
	if len(obj) == 0 || obj[0] != '{' {
		return nil
	}
	var seen uint64
	var failed error
	_, err := jsonx.EachMember(obj, func(mem jsonx.Member) bool {
		i, folded := jsonx.MatchKey(obj, mem, rule.Names)
		switch {
		case folded:
			failed = ErrAmbiguousParam
		case i < 0:
			return true
		case seen&(1<<i) != 0:
			failed = ErrAmbiguousParam
		default:
			seen |= 1 << i
			if i < len(rule.Nested) && rule.Nested[i] != nil {
				failed = CheckReadMembers(obj[mem.ValueStart:mem.ValueEnd], rule.Nested[i])
			}
		}
		return failed == nil
	})
	if err != nil {
		return jsonrpc.ErrMalformedJSON
	}
	return failed
}
