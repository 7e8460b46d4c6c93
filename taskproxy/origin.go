package taskproxy

import (
	"fmt"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
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

// guard is the mode as the protocol packages take it.
func (m RebindingProtection) guard() wire.Rebinding {
	switch m {
	case RebindingOn:
		return wire.RebindingOn
	case RebindingOff:
		return wire.RebindingOff
	}
	return wire.RebindingAuto
}
