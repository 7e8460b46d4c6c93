package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strings"
)

// GatewayIDPrefix marks the JSON-RPC ids the gateway makes up: its own calls
// to the upstream and the input requests it relays to clients.
const GatewayIDPrefix = "mcp-tasks:"

func UpstreamCallID(taskID string, attempt int) json.RawMessage {
	id, _ := json.Marshal(fmt.Sprintf("%s%s:call:%d", GatewayIDPrefix, taskID, attempt))
	return id
}

func InputID(taskID, key string) json.RawMessage {
	id, _ := json.Marshal(GatewayIDPrefix + taskID + ":input:" + key)
	return id
}

// ParseInputID recognises an id made by InputID.
func ParseInputID(raw json.RawMessage) (taskID, key string, ok bool) {
	var s string
	if json.Unmarshal(raw, &s) != nil || !strings.HasPrefix(s, GatewayIDPrefix) {
		return "", "", false
	}
	parts := strings.Split(strings.TrimPrefix(s, GatewayIDPrefix), ":")
	if len(parts) != 3 || parts[1] != "input" || parts[0] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[0], parts[2], true
}

// IsGatewayID reports whether a raw id is one the gateway made up.
func IsGatewayID(raw json.RawMessage) bool {
	var s string
	return json.Unmarshal(raw, &s) == nil && strings.HasPrefix(s, GatewayIDPrefix)
}
