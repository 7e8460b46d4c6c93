package task

import "context"

// StoreStats is a store's size, for metrics.
type StoreStats struct {
	// Tasks is the number of task records stored, ended ones included
	// (until the sweep after their ttl).
	Tasks int
	// Active is the number of tasks not yet completed, failed or cancelled.
	Active int
	// Bytes is the disk space of the store's files (0 in memory).
	Bytes int64
}

// StatsReporter is a Store that can report its size. Stats walks indexes, so
// callers must not call it per request: metrics call it at most every few
// seconds.
type StatsReporter interface {
	Stats(ctx context.Context) (StoreStats, error)
}
