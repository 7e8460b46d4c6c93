package task

import (
	"context"
	"errors"
)

// Deleter is a Store from which an operator deletes a finished task before
// its ttl ends: a task that filled its owner's bound on finished tasks
// (Limits.MaxFinished) stops counting at once. It is an optional interface
// beside Store: the admin API answers that a backend without it cannot
// delete tasks.
type Deleter interface {
	// DeleteFinished deletes the terminal task id, whatever its owner,
	// with all that indexes it, as the sweep deletes an expired task: its
	// owner then hears ErrExpired for it for one ttl more. It returns the
	// task as it was. A task not yet terminal is kept and gives
	// ErrNotFinished with the task; an unknown id gives ErrNotFound, a
	// task already deleted or swept ErrExpired.
	DeleteFinished(ctx context.Context, id string) (*Task, error)
}

var (
	// ErrNotFinished means the task is still working or waiting for
	// input: it must be cancelled before it is deleted.
	ErrNotFinished = errors.New("task is not finished (cancel it first)")
	// ErrNoDelete means the store backend cannot delete a task before its
	// ttl ends (it does not implement Deleter).
	ErrNoDelete = errors.New("task store backend cannot delete tasks")
)
