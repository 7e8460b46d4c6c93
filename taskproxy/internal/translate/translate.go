package translate

import (
	"encoding/json"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The _meta members of 2026-07-28 the bridge reads or writes.
const (
	MetaServerInfo = "io.modelcontextprotocol/serverInfo"
	MetaClientInfo = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel   = "io.modelcontextprotocol/logLevel"
)

// cacheableMethods are those whose 2026-07-28 results are CacheableResults
// (ttlMs and cacheScope required).
var cacheableMethods = map[string]bool{
	"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/read": true, "resources/templates/list": true,
}

// Result gives a 2025-11-25 result the 2026-07-28 fields: the
// resultType, the CacheableResult fields of list and read results, the
// server info, and tools without the 2025-11-25 execution member.
func Result(method string, result json.RawMessage, serverInfo json.RawMessage) json.RawMessage {
	if len(result) == 0 || result[0] != '{' {
		result = json.RawMessage("{}")
	}
	set := func(key string, value []byte) {
		if _, ok := jsonx.Get(result, key); !ok {
			if out, err := jsonx.Set(result, key, value); err == nil {
				result = out
			}
		}
	}
	set("resultType", []byte(`"complete"`))
	if cacheableMethods[method] {
		set("ttlMs", []byte("0"))
		set("cacheScope", []byte(`"private"`))
	}
	if len(serverInfo) > 0 {
		if out, err := jsonx.SetPath(result, []string{"_meta", MetaServerInfo}, serverInfo); err == nil {
			result = out
		}
	}
	if method == "tools/list" {
		result = withoutToolExecution(result)
	}
	return result
}

// withoutToolExecution drops execution (2025-11-25 taskSupport) from every
// tool: 2026-07-28 tools have none, tasks are server-directed.
func withoutToolExecution(result json.RawMessage) json.RawMessage {
	tools, ok := jsonx.Get(result, "tools")
	if !ok {
		return result
	}
	elems, err := jsonx.ArrayElements(tools)
	if err != nil {
		return result
	}
	out := []byte{'['}
	for i, e := range elems {
		tool := tools[e[0]:e[1]]
		if t, err := jsonx.Delete(tool, "execution"); err == nil {
			tool = t
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, tool...)
	}
	out = append(out, ']')
	if res, err := jsonx.Set(result, "tools", out); err == nil {
		return res
	}
	return result
}

// Error maps a 2025-11-25 error to the 2026-07-28 code: the
// retired resource-not-found -32002 is invalid params now.
func Error(e *jsonrpc.Error) *jsonrpc.Error {
	if e == nil {
		return nil
	}
	if e.Code == -32002 {
		out := *e
		out.Code = jsonrpc.CodeInvalidParams
		return &out
	}
	return e
}

// V2025Params are a 2026-07-28 request's params as a 2025-11-25 server
// takes them: without the per-request protocol fields in _meta (the
// session carries them), without the multi-round-trip members (the
// gateway answers the upstream's requests itself), and without a
// client's params.task, which 2026-07-28 ignores (tasks are the server's
// choice there) and a 2025-11-25 server that runs tasks would take as the
// request for one, a task the gateway would not follow.
func V2025Params(params json.RawMessage) json.RawMessage {
	params = jsonx.OrEmptyObject(params)
	for _, k := range []string{"inputResponses", "requestState", "task"} {
		if p, err := jsonx.Delete(params, k); err == nil {
			params = p
		}
	}
	out, err := jsonx.DeleteIn(params, "_meta", func(k string) bool { return strings.HasPrefix(k, "io.modelcontextprotocol/") })
	if err != nil {
		return params
	}
	return out
}
