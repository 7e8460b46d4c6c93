package taskproxy

import (
	"context"
	"errors"
	"fmt"
)

// Store errors. Callers test them with errors.Is.
var (
	// ErrNotFound means no task with that id exists for that owner. A task
	// of another owner gives the same error, so existence never leaks.
	ErrNotFound = errors.New("task not found")
	// ErrForeign is the ErrNotFound of a task that exists under another
	// owner. Callers answer it exactly as ErrNotFound; only the audit log
	// tells the two apart.
	ErrForeign = fmt.Errorf("%w (owned by another principal)", ErrNotFound)
	// ErrExists means a task with that id already exists.
	ErrExists = errors.New("task already exists")
	// ErrTerminal means the task is completed, failed or cancelled, and
	// terminal tasks never change.
	ErrTerminal = errors.New("task is in a terminal state")
	// ErrBadTransition means the state machine forbids the change.
	ErrBadTransition = errors.New("task status transition not allowed")
	// ErrInvalidCursor means a listing cursor was not one the store issued.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrClosed means the store has been closed.
	ErrClosed = errors.New("task store is closed")
)

// Store holds task records durably. Every lookup takes the owner key, and a
// record of another owner is reported as ErrNotFound. Implementations must be
// safe for concurrent use.
type Store interface {
	// Create stores a new task. When it returns nil the task is durable
	// and visible to Get.
	Create(ctx context.Context, t *Task) error
	// Get returns the owner's task with id.
	Get(ctx context.Context, owner, id string) (*Task, error)
	// Update applies fn to a copy of the owner's task with id and stores
	// the result, as one compare-and-set: if the record changed meanwhile,
	// fn runs again on the new record. A terminal task is never passed to
	// fn (ErrTerminal), and a status change the state machine forbids is
	// refused (ErrBadTransition). An error from fn aborts the update and is
	// returned as is.
	Update(ctx context.Context, owner, id string, fn func(*Task) error) (*Task, error)
	// List returns up to limit of the owner's tasks, oldest first, after
	// cursor ("" for the start), and the cursor of the next page ("" when
	// there is none).
	List(ctx context.Context, owner, cursor string, limit int) ([]*Task, string, error)
	// CountActive returns how many of the owner's tasks are not terminal.
	CountActive(ctx context.Context, owner string) (int, error)
	// Close releases the store.
	Close() error
}
