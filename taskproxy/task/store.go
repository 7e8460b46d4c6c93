package task

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	// ErrExpired is the ErrNotFound of the owner's own task that was
	// deleted at the end of its ttl; it is reported for one ttl more.
	ErrExpired = fmt.Errorf("%w (expired)", ErrNotFound)
	// ErrLeaseHeld means another live worker holds the task's lease.
	ErrLeaseHeld = errors.New("task lease held by another worker")
	// ErrIdempotencyMismatch means an idempotency key was reused with
	// different arguments.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with different arguments")
	// ErrUnavailable means the store cannot serve the call for now (its
	// database is unreachable, its disk is full or read-only) and the same
	// call may succeed later. Backends wrap their cause with it.
	ErrUnavailable = errors.New("task store unavailable")
)

// DefaultMaxRecordBytes is the record size limit unless configured.
const DefaultMaxRecordBytes = 32 << 20

// ErrRecordTooLarge means a task record would exceed the store's size
// limit; the write is refused and nothing else fails with it. The error is
// a *RecordTooLargeError.
var ErrRecordTooLarge = errors.New("task record too large")

// RecordTooLargeError reports the size of a refused record and the limit.
// Its text names sizes only, never the record's content.
type RecordTooLargeError struct{ Size, Limit int }

func (e *RecordTooLargeError) Error() string {
	return fmt.Sprintf("task record too large (%d bytes, limit %d)", e.Size, e.Limit)
}

// Is makes errors.Is(err, ErrRecordTooLarge) hold.
func (e *RecordTooLargeError) Is(target error) bool { return target == ErrRecordTooLarge }

// ErrQuotaExceeded means a create was refused because the owner already
// has as many non-terminal tasks, or as many finished tasks still kept, as
// allowed. The error is a *QuotaError.
var ErrQuotaExceeded = errors.New("too many active tasks")

// QuotaError reports the limit a refused create met: Limits.MaxActive, or
// Limits.MaxFinished when Finished is set.
type QuotaError struct {
	Limit    int
	Finished bool
}

func (e *QuotaError) Error() string {
	if e.Finished {
		return fmt.Sprintf("too many finished tasks kept (limit %d); they are kept until their ttl ends", e.Limit)
	}
	return fmt.Sprintf("too many active tasks (limit %d)", e.Limit)
}

// Is makes errors.Is(err, ErrQuotaExceeded) hold.
func (e *QuotaError) Is(target error) bool { return target == ErrQuotaExceeded }

// DuplicateError reports that a create carried the idempotency key of a
// live task of the same owner, with the same arguments: TaskID is that task.
type DuplicateError struct{ TaskID string }

func (e *DuplicateError) Error() string { return "duplicate of task " + e.TaskID }

// Lease says which worker runs a task and until when, unless renewed. A
// worker takes over a task only when its lease has expired or its holder is
// known to be gone, with a compare-and-set, so two workers never run one
// task.
type Lease struct {
	Holder  string    `json:"holder,omitempty"`
	Expires time.Time `json:"expires,omitzero"`
}

// Store is what a backend gives the gateway: durable task records, the
// bindings of 2025-11-25 sessions to their owners (with what a session's
// client said of itself), and what was learned of upstreams.
type Store interface {
	TaskStore
	SessionBinder
	SessionDescriber
	LearnedStore
}

// SessionBinder keeps which owner a 2025-11-25 session belongs to: the
// owner whose initialize answer named it. Bindings are security state, so
// they are stored durably and survive restarts; a binding idle for its ttl
// expires. Implementations must be safe for concurrent use.
type SessionBinder interface {
	// BindSession binds sessionID to owner for ttl. Binding a session
	// already bound to owner refreshes its ttl; one bound to another owner
	// is left alone and gives ErrForeign.
	BindSession(ctx context.Context, sessionID, owner string, ttl time.Duration) error
	// CheckSession returns nil when sessionID is bound to owner, ErrForeign
	// when it is bound to another owner and ErrNotFound when it is not
	// bound (never, forgotten or expired). With refresh > 0 a binding to
	// owner is extended to refresh from now, in the same transaction.
	CheckSession(ctx context.Context, sessionID, owner string, refresh time.Duration) error
	// ForgetSession removes the binding of sessionID, if any.
	ForgetSession(ctx context.Context, sessionID string) error
}

// TaskStore holds task records durably. Every lookup takes the owner key,
// and a record of another owner is reported as ErrNotFound.
// Implementations must be safe for concurrent use.
type TaskStore interface {
	// Create stores a new task. When it returns nil the task is durable
	// and visible to Get. A task with an IdempotencyKey that a live task of
	// the same owner already has is not stored: the error is a
	// *DuplicateError naming that task when the Fingerprints match, and
	// ErrIdempotencyMismatch when they do not.
	Create(ctx context.Context, t *Task) error
	// CreateWithin is Create with a quota: a non-terminal t is refused
	// with a *QuotaError (ErrQuotaExceeded) when its quota (Task.Quota:
	// its QuotaKey, or else its owner) already counts maxActive
	// non-terminal tasks, counted in the same transaction as the
	// create, so that concurrent creates never exceed it. maxActive <= 0
	// means no limit; a terminal t is never refused for the quota.
	CreateWithin(ctx context.Context, t *Task, maxActive int) error
	// CreateWithinLimits is CreateWithin with every bound of Limits:
	// besides MaxActive, any t (terminal or not) is refused with a
	// *QuotaError whose Finished is set when its quota already counts
	// MaxFinished terminal tasks whose ttl has not ended at t.CreatedAt.
	// A repeat of a
	// create (its idempotency key) still finds its task at either bound.
	CreateWithinLimits(ctx context.Context, t *Task, l Limits) error
	// Get returns the owner's task with id. A task of another owner is
	// refused before its arguments or result are read: the answer takes
	// as long whatever the task's size.
	Get(ctx context.Context, owner, id string) (*Task, error)
	// Update applies fn to a copy of the owner's task with id and stores
	// the result, as one compare-and-set: if the record changed meanwhile,
	// fn runs again on the new record. A terminal task is never passed to
	// fn (ErrTerminal), and a status change the state machine forbids is
	// refused (ErrBadTransition). An error from fn aborts the update and is
	// returned as is.
	Update(ctx context.Context, owner, id string, fn func(*Task) error) (*Task, error)
	// List returns the summaries (Task.Summary) of up to limit of the
	// owner's tasks, oldest first, after cursor ("" for the start), and the
	// cursor of the next page ("" when there is none). It reads no task's
	// arguments or result.
	List(ctx context.Context, owner, cursor string, limit int) ([]*Task, string, error)
	// CountActive returns how many non-terminal tasks count against quota
	// (Task.Quota): those whose QuotaKey is quota, and those without one
	// whose owner is quota.
	CountActive(ctx context.Context, quota string) (int, error)
	// ListActive pages through the non-terminal tasks of every owner, for
	// recovery: it returns up to limit after cursor ("" for the start) and
	// the cursor of the next page ("" when there is none).
	ListActive(ctx context.Context, cursor string, limit int) ([]*Task, string, error)
	// Holder names this process as a lease holder of this store.
	Holder() string
	// Acquire takes or renews the lease of the owner's task for holder,
	// until now+ttl: it succeeds when the lease is free, expired, held by
	// holder, or held by a holder the store knows to be gone. Otherwise it
	// fails with ErrLeaseHeld. Terminal tasks give ErrTerminal. A zero
	// ttl releases holder's lease: it is left expired at now, free for
	// any holder.
	Acquire(ctx context.Context, owner, id, holder string, now time.Time, ttl time.Duration) (*Task, error)
	// Sweep deletes tasks whose ttl ended before now, with their index
	// keys, at most batch per transaction, and returns how many it deleted.
	// The owner's lookups of a deleted task give ErrExpired for one ttl
	// more.
	Sweep(ctx context.Context, now time.Time, batch int) (int, error)
	// Close releases the store.
	Close() error
}
