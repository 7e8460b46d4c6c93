package runtime

import (
	"context"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// StoreStats reports the size of the runtime's store; ok is false when the
// store cannot tell (it does not implement StatsReporter, or is not open yet).
func (op Operator) StoreStats(ctx context.Context) (st task.StoreStats, ok bool, err error) {
	rt := op.rt
	if !rt.Ready() { // a lazy runtime's store is not open before its first start
		return task.StoreStats{}, false, nil
	}
	sr, ok := rt.Store.(task.StatsReporter)
	if !ok {
		return task.StoreStats{}, false, nil
	}
	st, err = sr.Stats(ctx)
	return st, true, err
}
