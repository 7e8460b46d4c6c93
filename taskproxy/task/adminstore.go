package task

import (
	"context"
	"errors"
	"time"
)

// Operator access to a store: browsing the tasks of every owner, for the
// admin API. It is an optional interface beside Store, so that a store
// backend without it still serves clients (the admin API then answers that
// the store cannot be browsed).

// TaskFilter selects the tasks of a store-wide listing; empty fields match
// every task.
type TaskFilter struct {
	Status    Status
	Principal string
	// Tenant is the owner's tenant (the JWT's tenant claim).
	Tenant string
	// Route is the route (handler instance) that created the task.
	Route string
	Tool  string
	// CreatedAfter and CreatedBefore bound the task's creation time
	// (exclusive); zero bounds nothing.
	CreatedAfter, CreatedBefore time.Time
}

// Match reports whether t passes the filter.
func (f TaskFilter) Match(t *Task) bool {
	return (f.Status == "" || t.Status == f.Status) &&
		(f.Principal == "" || t.Principal == f.Principal) &&
		(f.Tenant == "" || t.Tenant == f.Tenant) &&
		(f.Route == "" || t.Route == f.Route) &&
		(f.Tool == "" || t.Tool == f.Tool) &&
		(f.CreatedAfter.IsZero() || t.CreatedAt.After(f.CreatedAfter)) &&
		(f.CreatedBefore.IsZero() || t.CreatedAt.Before(f.CreatedBefore))
}

// OnlyStatus reports whether the filter selects by status alone (or not
// at all): what a store can select without reading each task's record.
func (f TaskFilter) OnlyStatus() bool {
	return f == TaskFilter{Status: f.Status}
}

// AdminLister is a Store that operators can browse across owners. Its
// methods bypass the owner binding every Store method enforces: only the
// operator's admin API may call them.
type AdminLister interface {
	// ListAll returns the summaries (Task.Summary) of up to limit tasks
	// of every owner that match filter, newest first (GetAny has a task
	// whole), after cursor ("" for the start), and the cursor of the
	// next page ("" when there is none). A cursor it did not issue gives
	// ErrInvalidCursor.
	ListAll(ctx context.Context, filter TaskFilter, cursor string, limit int) ([]*Task, string, error)
	// GetAny returns the task with id whatever its owner: ErrExpired when
	// it was swept at the end of its ttl, ErrNotFound when it never
	// existed (or its tombstone is gone too).
	GetAny(ctx context.Context, id string) (*Task, error)
}

// Errors of the operator access.
var (
	// ErrNotReady means the runtime's store is not open yet: no
	// configuration using it has started serving.
	ErrNotReady = errors.New("task store not open yet (no configuration using it has started)")
	// ErrNoAdminAccess means the store backend cannot be browsed across
	// owners (it does not implement AdminLister).
	ErrNoAdminAccess = errors.New("task store does not support store-wide listing")
)
