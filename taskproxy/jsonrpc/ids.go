package jsonrpc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// GatewayIDPrefix marks the JSON-RPC ids the gateway makes up: its own calls
// to the upstream and the input requests it relays to clients.
const GatewayIDPrefix = "mcp-tasks:"

// UpstreamCallID is the id of a task's attempt-th call to the upstream. A
// task id of the gateway's own making (base64url) needs no escape, and the
// id is written in one allocation; any other goes through encoding/json.
func UpstreamCallID(taskID string, attempt int) json.RawMessage {
	if !plainIDChars(taskID) {
		id, _ := json.Marshal(fmt.Sprintf("%s%s:call:%d", GatewayIDPrefix, taskID, attempt))
		return id
	}
	b := make([]byte, 0, len(`"`+GatewayIDPrefix+`:call:"`)+len(taskID)+20)
	b = append(append(append(b, '"'), GatewayIDPrefix...), taskID...)
	b = strconv.AppendInt(append(b, ":call:"...), int64(attempt), 10)
	return append(b, '"')
}

// plainIDChars reports whether s has only letters, digits, '-' and '_':
// nothing JSON escapes.
func plainIDChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
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
