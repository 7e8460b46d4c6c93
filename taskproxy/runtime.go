package taskproxy

import (
	"context"
	"encoding/json"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Runtime is the state that outlives one configuration: the task runtime
// (the store, the hub, the running workers and the background work on the
// store: lease renewal, sweeping, recovery after a restart) and the
// gateway's tables of sessions and long-lived streams. Configurations that
// share a storage directory share one Runtime.
//
// A runtime does nothing on its own until a configuration using it starts
// serving (Gateway.Start): only then is its store opened, its background
// work started and recovery run. A configuration that is only provisioned
// (caddy validate, a reload that fails) leaves the store untouched. Store
// is nil until then for a runtime from NewLazyRuntime: check Ready first.
type Runtime struct {
	*runtime.Runtime
	// Operator lists, reads, cancels and deletes tasks across owners, for the admin
	// API and metrics.
	runtime.Operator
	sessions *gate.SessionTable
	streams  *gate.StreamTable
}

// NewRuntime wraps an open store. Its background work starts with the
// first gateway that starts.
func NewRuntime(store task.Store) *Runtime { return newRuntime(store, nil) }

// NewLazyRuntime returns a runtime whose store open opens when the first
// gateway on it starts, so that merely provisioning a configuration opens
// nothing exclusively. A failed open is tried again at the next start.
func NewLazyRuntime(open func() (task.Store, error)) *Runtime { return newRuntime(nil, open) }

func newRuntime(store task.Store, open func() (task.Store, error)) *Runtime {
	rt := runtime.New(store, open, renderView)
	return &Runtime{
		Runtime:  rt,
		Operator: rt.Operator(),
		sessions: gate.NewSessionTable(gate.MaxSessions),
		streams:  gate.NewStreamTable(),
	}
}

// Health is what a load balancer check needs to know of a runtime: whether
// its store is open and reachable, how many workers run, and whether the
// recovery after the start is done (the fields' documentation is on the
// task runtime's Health).
type Health runtime.Health

// Healthy reports whether the store is open and reachable and recovery is
// done.
func (h Health) Healthy() bool { return runtime.Health(h).Healthy() }

// Health reads the store once and reports the runtime's state.
func (rt *Runtime) Health(ctx context.Context) Health { return Health(rt.Runtime.Health(ctx)) }

// renderView encodes the tasks/get result of t on w, for the runtime's
// view cache.
func renderView(t *task.Task, w runtime.Wire) ([]byte, error) {
	if w == runtime.WireV2026 {
		return json.Marshal(v2026.Detail(t, "complete"))
	}
	return v2025.AppendTask(nil, t), nil
}

// OpenStreams reports how many long-lived answers of kind ("listen":
// subscriptions/listen streams; "result": tasks/result answers waiting for
// an outcome) the gateways on rt hold open.
func (rt *Runtime) OpenStreams(kind string) int {
	for k := range gate.NumStreamKinds {
		if k.String() == kind {
			return rt.streams.Open(k)
		}
	}
	return 0
}

// StreamKinds lists the kinds OpenStreams counts.
func StreamKinds() []string {
	kinds := make([]string, 0, gate.NumStreamKinds)
	for k := range gate.NumStreamKinds {
		kinds = append(kinds, k.String())
	}
	return kinds
}
