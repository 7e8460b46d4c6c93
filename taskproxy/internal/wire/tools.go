package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What the gateway knows of its upstream's own tasks (2025-11-25): whether
// its initialize answer declares task-augmented tools/call, and the
// execution.taskSupport each tool declares in tools/list. Both are learned
// from the answers passing through, per route (one Gateway serves one
// route), and replaced by every later answer. What an initialize answer
// declared is kept in the store too ([UpstreamCaps.KeepIn]), since a session's
// initialize is seen by one route of one process only: the route of the
// next configuration, the next process and the other replicas recall it
// from there, and learn the tools' modes from the upstream's tools/list on
// the caller's session when a request needs them (LearnToolsFor). A tool
// the upstream runs as a task itself is called with params.task and
// followed as a task client by the task's runtime worker; for every
// other tool the gateway makes the task.

// UpstreamCaps is the learned knowledge of one route's upstream.
type UpstreamCaps struct {
	mu sync.RWMutex
	// tasksCall is what the last initialize answer said of
	// capabilities.tasks.requests.tools.call, seen here or recalled from
	// the store; nil before either.
	tasksCall *bool
	// tools holds the taskSupport of every tool seen in a tools/list
	// answer ("forbidden" when the tool declares none).
	tools map[string]task.Support
	// fetched is when the gateway last fetched a tools/list itself.
	fetched time.Time
	// record is where tasksCall is kept for other processes ([UpstreamCaps.KeepIn]).
	record capsRecord
}

// LearnInitialize records capabilities.tasks of an initialize result.
func (u *UpstreamCaps) LearnInitialize(result []byte) {
	var r struct {
		Capabilities struct {
			Tasks *struct {
				Requests *struct {
					Tools *struct {
						Call json.RawMessage `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(result, &r) != nil {
		return
	}
	call := false
	if t := r.Capabilities.Tasks; t != nil && t.Requests != nil && t.Requests.Tools != nil {
		call = len(t.Requests.Tools.Call) > 0 && t.Requests.Tools.Call[0] == '{'
	}
	u.mu.Lock()
	u.tasksCall = &call
	save := u.record.due(call)
	u.mu.Unlock()
	if save {
		u.save(call)
	}
}

// LearnTools records the taskSupport of the tools of one tools/list page.
func (u *UpstreamCaps) LearnTools(result []byte) {
	m, found, _, _, err := jsonx.FindLast(result, "tools")
	if err != nil || !found {
		return
	}
	tools := result[m.ValueStart:m.ValueEnd]
	if elems, err := jsonx.ArrayElements(tools); err == nil {
		u.learnToolElems(tools, elems)
	}
}

// learnToolElems records the taskSupport of the tools at elems, the spans of
// the array tools. It scans the tools instead of decoding them: every
// tools/list answer passing through comes here, and decoding a long list
// cost twice the rewrite that follows it. A tool without a string name is
// passed over; an execution without a valid taskSupport counts as none
// ("forbidden", the spec's default).
func (u *UpstreamCaps) learnToolElems(tools []byte, elems [][2]int) {
	if len(elems) == 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tools == nil {
		// Sized for a usual page at most: a map keeps its size for ever,
		// and the elements of a hostile or broken answer need not be
		// tools (four million of them once kept 312 MiB).
		u.tools = make(map[string]task.Support, min(len(elems), maxToolsHint))
	}
	for _, span := range elems {
		tool := tools[span[0]:span[1]]
		name, ok := toolName(tool)
		if !ok {
			continue
		}
		mode := declaredTaskSupport(tool)
		if old, ok := u.tools[string(name)]; !ok || old != mode { // a lookup by bytes allocates nothing
			u.tools[string(name)] = mode
		}
	}
}

// maxToolsHint bounds the size the learned modes' map is made with.
const maxToolsHint = 64

// toolName is the name of a tool of a tools/list answer, unescaped; ok is
// false when it has no string name.
func toolName(tool []byte) (name []byte, ok bool) {
	raw, ok := jsonx.GetLast(tool, "name")
	if !ok || len(raw) < 2 || raw[0] != '"' {
		return nil, false
	}
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) { // else decoded, invalid bytes as U+FFFD
		return raw[1 : len(raw)-1], true
	}
	return []byte(jsonx.Unquote(raw)), true
}

// declaredTaskSupport is the execution.taskSupport a tool of a tools/list
// answer declares, "forbidden" when it declares none or no valid one.
func declaredTaskSupport(tool []byte) task.Support {
	exec, ok := jsonx.GetLast(tool, "execution")
	if !ok || len(exec) == 0 || exec[0] != '{' {
		return task.SupportForbidden
	}
	raw, ok := jsonx.GetLast(exec, "taskSupport")
	if !ok || len(raw) < 2 || raw[0] != '"' {
		return task.SupportForbidden
	}
	if m, err := task.ParseSupport(jsonx.Unquote(raw)); err == nil {
		return m
	}
	return task.SupportForbidden
}

// ToolMode returns the upstream's own task mode of a tool, and whether the
// tool is known at all.
func (u *UpstreamCaps) ToolMode(name string) (task.Support, bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	m, ok := u.tools[name]
	return m, ok
}

// runsTask reports whether the upstream runs the tool as a task of its own
// when asked: the tool declares optional or required, and the upstream may
// run tasks (mayRunTasksLocked).
func (u *UpstreamCaps) runsTask(name string) bool {
	u.mu.RLock()
	defer u.mu.RUnlock()
	m, ok := u.tools[name]
	return ok && m != task.SupportForbidden && u.mayRunTasksLocked()
}

// mayRunTasksLocked reports whether the upstream's initialize answer, seen
// here or recalled from the store, declared task-augmented tools/call, or
// whether none is known: a tool declaring a task mode is then taken at its
// word, since the spec lets a server declare one only under that
// capability. u.mu is held.
func (u *UpstreamCaps) mayRunTasksLocked() bool { return u.tasksCall == nil || *u.tasksCall }

// declaresTasks reports whether the upstream's initialize answer, seen
// here or recalled from the store, is known, and whether it declared
// task-augmented tools/call.
func (u *UpstreamCaps) declaresTasks() (known, declares bool) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	return u.tasksCall != nil, u.tasksCall != nil && *u.tasksCall
}

// ToolPolicy decides each tool's task mode: the configured modes (the
// fallback for tools not named), and what the gateway learned of the
// upstream's own from the answers passing through (caps). It rewrites the
// initialize and tools/list answers that advertise them ([ToolPolicy.RewriteToolsList]).
type ToolPolicy struct {
	modes     map[string]task.Support
	fallback  task.Support
	listTasks bool // tasks/list is served: the capability says so
	Caps      UpstreamCaps
}

// NewToolPolicy returns the policy of the configured modes (the fallback
// for tools not named), with nothing learned yet.
func NewToolPolicy(modes map[string]task.Support, fallback task.Support, listTasks bool) *ToolPolicy {
	return &ToolPolicy{modes: modes, fallback: fallback, listTasks: listTasks}
}

// configured returns the configured task mode of a tool.
func (p *ToolPolicy) configured(name string) task.Support {
	if m, ok := p.modes[name]; ok {
		return m
	}
	return p.fallback
}

// EffectiveMode is the task mode the gateway applies to and advertises for
// a tool: the configured one, except that a tool the upstream runs only as
// a task is required, on both wires, whatever is configured (the upstream
// refuses it otherwise). An upstream whose initialize answer declared no
// task calls runs no tool as a task: its configuration stands. A tool the
// upstream forbids as a task stays whatever is configured: the gateway
// makes those tasks itself.
func (p *ToolPolicy) EffectiveMode(name string) task.Support {
	if m, ok := p.Caps.ToolMode(name); ok && m == task.SupportRequired && p.Caps.runsTask(name) {
		return task.SupportRequired
	}
	return p.configured(name)
}

// UpstreamRunsTask reports whether a task of the tool is created at the
// upstream and followed there by the task's runtime worker.
func (p *ToolPolicy) UpstreamRunsTask(name string) bool { return p.Caps.runsTask(name) }

// toolsListRefetch spaces the gateway's own tools/list fetches for a tool
// it has not seen: calls of a tool the upstream does not list must not each
// cost a fetch.
const toolsListRefetch = 10 * time.Second

// maxToolsListPages bounds the pages one fetch follows.
const maxToolsListPages = 20

// LearnToolsFor fetches the upstream's tools/list on the caller's session
// when the tool has not been seen in a tools/list answer yet (the client
// calls without listing, or the session's initialize and listing went
// through another process, replica or configuration), so that the call is
// decided on what the upstream declares. An upstream known, from its
// initialize answer here or from the store, to declare no task calls is
// never asked. For a plain call (augmented false) only an upstream known
// to declare task calls is asked: any other answers the call as it would
// without the gateway. A failed fetch leaves the tool unknown: the gateway
// then makes the task itself, as for any upstream.
func (p *ToolPolicy) LearnToolsFor(ctx context.Context, r *http.Request, next http.Handler, name string, augmented bool) {
	if _, ok := p.Caps.ToolMode(name); ok {
		return
	}
	p.Caps.Recall(ctx)
	if known, declares := p.Caps.declaresTasks(); known && !declares || !known && !augmented {
		return
	}
	p.Caps.mu.Lock()
	if time.Since(p.Caps.fetched) < toolsListRefetch {
		p.Caps.mu.Unlock()
		return
	}
	p.Caps.fetched = time.Now()
	p.Caps.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cursor := ""
	for range maxToolsListPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		answer, err := upstream.Request(ctx, r, next, "", json.RawMessage(fmt.Sprintf("%q", jsonrpc.GatewayIDPrefix+"tools-list:"+task.NewTaskID())), "tools/list", params)
		if err != nil || answer.Error != nil {
			return
		}
		p.Caps.LearnTools(answer.Result)
		var p struct {
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(answer.Result, &p) != nil || p.NextCursor == "" {
			return
		}
		cursor = p.NextCursor
	}
}
