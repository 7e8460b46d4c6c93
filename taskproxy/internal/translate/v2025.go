package translate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// The reverse direction: a 2025-11-25 client in front of an upstream that
// speaks only 2026-07-28 (the reverse version bridge). Its session
// carries what every 2026-07-28 request says about itself (protocol
// version, client capabilities and info, log level); the answers lose the
// 2026-07-28 fields a 2025-11-25 client does not know.

// The _meta members of 2026-07-28 requests the reverse bridge writes.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// V2025Result gives a 2026-07-28 result its 2025-11-25 form: without
// resultType, the CacheableResult fields (ttlMs, cacheScope) and the
// server info in _meta (a 2025-11-25 server says it once, in its
// initialize answer); _meta goes when nothing else is in it. Every other
// member stays as the upstream wrote it.
func V2025Result(result json.RawMessage) json.RawMessage {
	if len(result) == 0 || result[0] != '{' {
		return json.RawMessage("{}")
	}
	for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
		if out, err := jsonx.Delete(result, k); err == nil {
			result = out
		}
	}
	if out, err := jsonx.DeleteIn(result, "_meta", func(k string) bool { return k == MetaServerInfo }); err == nil {
		result = out
	}
	return result
}

// extensionTasks is the 2026-07-28 tasks extension's name.
const extensionTasks = "io.modelcontextprotocol/tasks"

// V2026ClientCapabilities are a 2025-11-25 client's capabilities (from its
// initialize) as a 2026-07-28 request declares them: without the
// 2025-11-25 tasks member, and without the tasks extension should the
// client name it (tasks are an extension there, which only the gateway
// declares, when its policy wants a task: a client declaring it itself
// would have the upstream run tasks past the gateway's quota, audit and
// run_timeout), everything else kept. Anything but an object is no
// capabilities: {}.
func V2026ClientCapabilities(caps json.RawMessage) json.RawMessage {
	if len(caps) == 0 || caps[0] != '{' {
		return json.RawMessage("{}")
	}
	out, err := jsonx.Delete(caps, "tasks")
	if err == nil {
		out, err = jsonx.DeleteIn(out, "extensions", func(k string) bool { return k == extensionTasks })
	}
	if err != nil {
		return json.RawMessage("{}")
	}
	return out
}

// gatewayMeta reports the per-request _meta members V2026Params sets:
// a client's own members of those names (a 2025-11-25 client has no
// business sending them) are dropped first, every spelling and copy of
// them, so that no upstream reads the client's instead of the gateway's.
func gatewayMeta(key string) bool {
	switch key {
	case MetaProtocolVersion, MetaClientCapabilities, MetaClientInfo, MetaLogLevel:
		return true
	}
	return false
}

// RequestMeta is what a 2025-11-25 session carries that a 2026-07-28
// request must say itself.
type RequestMeta struct {
	// Capabilities are the 2026-07-28 client capabilities (required).
	Capabilities json.RawMessage
	// ClientInfo is the client's Implementation, if known.
	ClientInfo json.RawMessage
	// LogLevel is the level the client set with logging/setLevel; "" asks
	// for no log messages, as 2026-07-28 says.
	LogLevel string
}

// V2026Params are a 2025-11-25 request's params as a 2026-07-28 server
// takes them: with the per-request _meta fields (protocol version, client
// capabilities, client info, log level) set from meta, and without
// params.task (2025-11-25 task augmentation, which 2026-07-28 ignores;
// removed so that no upstream mistakes it). The client's own _meta
// members (its progress token) stay.
func V2026Params(params json.RawMessage, meta RequestMeta) (json.RawMessage, error) {
	params = jsonx.OrEmptyObject(params)
	if len(params) == 0 || params[0] != '{' {
		return nil, errors.New("params must be an object")
	}
	out, err := jsonx.Delete(params, "task")
	if err == nil {
		out, err = jsonx.DeleteIn(out, "_meta", gatewayMeta)
	}
	if err != nil {
		return nil, fmt.Errorf("reading params: %w", err)
	}
	caps := meta.Capabilities
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage("{}")
	}
	set := func(key string, value []byte) {
		if err == nil {
			out, err = jsonx.SetPath(out, []string{"_meta", key}, value)
		}
	}
	set(MetaProtocolVersion, []byte(`"2026-07-28"`))
	set(MetaClientCapabilities, caps)
	if len(meta.ClientInfo) > 0 && meta.ClientInfo[0] == '{' {
		set(MetaClientInfo, meta.ClientInfo)
	}
	if meta.LogLevel != "" {
		level, _ := json.Marshal(meta.LogLevel)
		set(MetaLogLevel, level)
	}
	if err != nil {
		return nil, fmt.Errorf("setting the request's _meta: %w", err)
	}
	return out, nil
}

// DefaultServerInfo names the server of an initialize answer built from a
// server/discover result without server info (2025-11-25 requires one).
var DefaultServerInfo = json.RawMessage(`{"name":"mcp-tasks-gateway","version":"0"}`)

// V2025Initialize is the 2025-11-25 initialize result built from a
// 2026-07-28 server/discover result: protocolVersion 2025-11-25, the
// capabilities without extensions (2025-11-25 has none), the server info
// of the result's _meta (DefaultServerInfo without one) and the
// instructions.
func V2025Initialize(discover json.RawMessage) (json.RawMessage, error) {
	var d struct {
		Capabilities json.RawMessage            `json:"capabilities"`
		Instructions string                     `json:"instructions"`
		Meta         map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(jsonx.OrEmptyObject(discover), &d); err != nil {
		return nil, fmt.Errorf("reading server/discover: %w", err)
	}
	caps := d.Capabilities
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage("{}")
	}
	caps, err := jsonx.Delete(caps, "extensions")
	if err != nil {
		return nil, fmt.Errorf("reading server/discover capabilities: %w", err)
	}
	info := d.Meta[MetaServerInfo]
	if len(info) == 0 || info[0] != '{' {
		info = DefaultServerInfo
	}
	res := map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": info}
	if d.Instructions != "" {
		res["instructions"] = d.Instructions
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encoding the initialize result: %w", err)
	}
	return out, nil
}
