package taskproxy

import (
	"fmt"
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// DNS rebinding protection for what the gateway answers itself. The spec has
// servers validate Origin and Host; for requests that pass through, the
// upstream does, but tasks and their results never reach it. The rule is the
// usual one for local servers: a request that arrived on a loopback address
// must name a loopback host, in Host and in Origin when it has one.
//
// A rebinding attack borrows a browser on the gateway's machine, which holds
// no credentials of the gateway's: an authenticated caller, or a request a
// trusted front proxy forwarded (which names the public host by design), is
// not what the rule protects against, so RebindingAuto skips it there.

// RebindingProtection says when the DNS rebinding guard applies.
type RebindingProtection string

// The guard modes.
const (
	// RebindingAuto guards anonymous requests on a loopback listener that
	// did not come through a trusted proxy. It is the default.
	RebindingAuto RebindingProtection = "auto"
	// RebindingOn guards every request on a loopback listener.
	RebindingOn RebindingProtection = "on"
	// RebindingOff never guards.
	RebindingOff RebindingProtection = "off"
)

// ParseRebindingProtection validates a mode name; "" is RebindingAuto.
func ParseRebindingProtection(s string) (RebindingProtection, error) {
	switch m := RebindingProtection(s); m {
	case "":
		return RebindingAuto, nil
	case RebindingAuto, RebindingOn, RebindingOff:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want auto, on or off)", s)
}

// guarded reports whether the rebinding guard applies to the call.
func (c *call) guarded() bool {
	switch c.g.cfg.RebindingProtection {
	case RebindingOff:
		return false
	case RebindingOn:
		return true
	}
	return c.owner == task.Anonymous && !peerOf(c.r).ViaTrustedProxy
}

// guardOrigin answers 403 and returns false for a rebinding suspect, and
// 415 for a post a web page could have sent cross-site (gate.CrossSiteSimple),
// whoever the caller.
func (c *call) guardOrigin() bool {
	if gate.CrossSiteSimple(c.r) {
		writeJSONError(c.w, http.StatusUnsupportedMediaType, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json"))
		return false
	}
	if !c.guarded() || !gate.RebindingSuspect(c.r) {
		return true
	}
	writeJSONError(c.w, http.StatusForbidden, c.msg.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Forbidden: the Host or Origin header names a host this local server does not serve"))
	return false
}
