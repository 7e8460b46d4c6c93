package task

import (
	"context"
	"strings"
	"time"
)

// ExpiredLeaseLister is implemented by stores that can list the active
// tasks whose lease expired by now without reading every active task.
type ExpiredLeaseLister interface {
	// ListExpiredLeases pages, as ListActive does, through the active
	// tasks whose lease expired at or before now.
	ListExpiredLeases(ctx context.Context, now time.Time, cursor string, limit int) ([]*Task, string, error)
}

// Leader is implemented by stores that several processes share, to elect
// the one process that does a duty (sweeping) for all. A store that does
// not implement it is used by one process only, which always leads.
type Leader interface {
	// TryLead takes or renews the leadership name for holder until
	// ttl from now, and reports whether holder leads: it does when no one
	// led, the last leader's term ran out, or holder led already.
	TryLead(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
}

// WriteChecker is implemented by stores that can tell, without writing a
// task, whether they would take a write now (Badger's disk guard: the
// filesystem writable and with room). Health checks ask it.
type WriteChecker interface {
	// CheckWritable returns nil when a write may go ahead, else why not
	// (an error that is ErrUnavailable).
	CheckWritable() error
}

// CleanStoreError keeps the first line of a store's error: Badger's errors
// about oversized keys and values go on with a hex dump of the data, which
// holds another caller's arguments and must reach neither clients nor logs.
// Backends use it on the errors they return; the gateway on what it logs.
func CleanStoreError(err error) error {
	msg := err.Error()
	before, _, ok := strings.Cut(msg, "\n")
	if !ok {
		return err
	}
	return &cleanError{msg: strings.TrimSuffix(strings.TrimSpace(before), ":"), err: err}
}

// cleanError shows a shortened message but still unwraps to the original,
// so errors.Is keeps working.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }
