package taskproxy

import "context"

// StoreStats reports the size of the runtime's store; ok is false when the
// store cannot tell (it does not implement StatsReporter, or is not open yet).
func (rt *Runtime) StoreStats(ctx context.Context) (st StoreStats, ok bool, err error) {
	if !rt.Ready() { // a lazy runtime's store is not open before its first start
		return StoreStats{}, false, nil
	}
	sr, ok := rt.Store.(StatsReporter)
	if !ok {
		return StoreStats{}, false, nil
	}
	st, err = sr.Stats(ctx)
	return st, true, err
}
