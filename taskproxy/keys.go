package taskproxy

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// Upstream SDKs do not all read object keys alike: Go's encoding/json (go-sdk,
// mcp-go) matches a key to a field under Unicode simple case folding and
// takes the last of duplicates ("NAME", or "nſme" with U+017F, is "name"),
// JavaScript's JSON.parse matches exactly and also takes the last. Where the
// gateway reads a member it acts on (a tool's name, params.task, a task id,
// _meta), a key that another reader could take for that member is refused:
// both readers then see the same message.

// matchKey returns the index in names of mem's key (decoded, when it has
// escapes, as encoding/json decodes it) and, when no name matches exactly,
// whether one matches under simple case folding.
func matchKey(obj []byte, mem member, names []string) (exact int, folded bool) {
	key := obj[mem.keyStart+1 : mem.keyEnd-1]
	if bytes.IndexByte(key, '\\') >= 0 {
		var decoded string
		if json.Unmarshal(obj[mem.keyStart:mem.keyEnd], &decoded) != nil {
			return -1, false
		}
		key = []byte(decoded)
	}
	for i, name := range names {
		if string(key) == name {
			return i, false
		}
	}
	for _, name := range names {
		// The names are ASCII, and a rune that folds to an ASCII one is at
		// most 3 bytes long (U+212A, the Kelvin sign, for "k"): a key of
		// another length cannot match, and most keys stop here.
		if len(key) >= len(name) && len(key) <= 3*len(name) && equalFold(key, name) {
			return -1, true
		}
	}
	return -1, false
}

// equalFold is bytes.EqualFold(b, []byte(s)) without the conversion: it
// reports whether b and s, read as UTF-8 (an invalid byte is U+FFFD), are
// equal under simple Unicode case folding, the rule encoding/json matches
// keys with.
func equalFold(b []byte, s string) bool {
	for len(b) > 0 && len(s) > 0 {
		r1, n1 := utf8.DecodeRune(b)
		r2, n2 := utf8.DecodeRuneInString(s)
		b, s = b[n1:], s[n2:]
		if r1 == r2 {
			continue
		}
		if r2 < r1 {
			r1, r2 = r2, r1
		}
		// The fold orbit of r1, in ascending order, as strings.EqualFold
		// walks it.
		r := unicode.SimpleFold(r1)
		for r != r1 && r < r2 {
			r = unicode.SimpleFold(r)
		}
		if r != r2 {
			return false
		}
	}
	return len(b) == 0 && len(s) == 0
}

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
var errAmbiguousParam = &readError{CodeInvalidRequest, "a member of params the gateway reads appears twice or in another case"}

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
	_, err := eachMember(obj, func(mem member) bool {
		i, folded := matchKey(obj, mem, rule.names)
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
				failed = checkReadMembers(obj[mem.valueStart:mem.valueEnd], rule.nested[i])
			}
		}
		return failed == nil
	})
	if err != nil {
		return errMalformedJSON
	}
	return failed
}
